// Limited in proxy.js, before it runs.
export function GET() {
  return Response.json({ guarded: true });
}

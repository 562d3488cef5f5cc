// The fixture of test/nextjs.test.ts: a Next.js app whose route handlers use the built packages.
// ioredis stays a Node.js require at run time, as Next.js documents for packages with sockets.
export default { serverExternalPackages: ['ioredis'] };

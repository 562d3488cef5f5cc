import ts from 'typescript';

/** What a module exports, as TypeScript reads its source or declarations. */
export interface DeclaredExports {
  /** Every name, types included, sorted. */
  readonly all: readonly string[];
  /** The names that exist at run time (values not exported with `export type`), sorted. */
  readonly values: readonly string[];
}

/**
 * The exports of each of `files` (a `src/index.ts`, a `.d.ts`, a `.d.cts`), from one program with
 * `options` laid over node16 resolution. `export *` and re-exports are followed, as a user's editor
 * follows them.
 */
export function declaredExports(
  files: readonly string[],
  options: ts.CompilerOptions = {},
): { exports: DeclaredExports[]; diagnostics: string[] } {
  const program = ts.createProgram(files, {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    module: ts.ModuleKind.Node16,
    moduleResolution: ts.ModuleResolutionKind.Node16,
    ...options,
  });
  const checker = program.getTypeChecker();
  const exports = files.map((file) => {
    const module = checker.getSymbolAtLocation(program.getSourceFile(file)!);
    if (module === undefined) throw new Error(`${file} is not a module`);
    const all: string[] = [];
    const values: string[] = [];
    for (const symbol of checker.getExportsOfModule(module)) {
      all.push(symbol.name);
      if (isRuntimeValue(symbol, checker)) values.push(symbol.name);
    }
    return { all: all.sort(), values: values.sort() };
  });
  const diagnostics = ts
    .getPreEmitDiagnostics(program)
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  return { exports, diagnostics };
}

function isRuntimeValue(symbol: ts.Symbol, checker: ts.TypeChecker): boolean {
  if (symbol.declarations?.some((d) => ts.isTypeOnlyImportOrExportDeclaration(d))) return false;
  const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  return (target.flags & ts.SymbolFlags.Value) !== 0;
}

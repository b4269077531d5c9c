import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';

const ROOT = join(__dirname, '..', '..');

/**
 * Every environment variable infra/config.ts reads has a row in README.md's configuration table,
 * and every variable the table names is read: the table is the operator's contract. A row may name
 * several as `PLAN_DEFAULT_BURST` / `_HOURLY` / `_DAILY` (the suffixes replace the last part).
 */
describe('configuration table (unit)', () => {
  const source = readFileSync(join(ROOT, 'infra', 'config.ts'), 'utf8');
  // Every reader of one variable (`const int = (name: string, …`): list readers too (`seconds`, `ports`).
  const readers = [...source.matchAll(/const (\w+) = \(name: string\b/g)].map((m) => m[1]);
  const read = new Set([...source.matchAll(new RegExp(`\\b(?:${readers.join('|')})\\('([A-Z][A-Z0-9_]+)'`, 'g'))].map((m) => m[1]));
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1));
  const documented = new Set<string>();
  for (const line of table.split('\n').filter((l) => l.startsWith('| `'))) {
    const names = [...line.split('|')[1].matchAll(/`([A-Z_][A-Z0-9_]*)`/g)].map((m) => m[1]);
    const stem = names[0].slice(0, names[0].lastIndexOf('_'));
    for (const n of names) documented.add(n.startsWith('_') ? stem + n : n);
  }

  it('finds the variables on both sides (the parsing works)', () => {
    expect(readers).to.include.members(['int', 'str', 'bool', 'url', 'seconds', 'ports']);
    expect(read).to.include('DELIVERY_RETRY_SCHEDULE').and.to.include('SMTP_PUBLIC_PORTS');
    expect(read.size).to.be.above(40);
    expect(documented).to.include('PLAN_DEFAULT_DAILY').and.to.include('PORT');
  });

  it('documents every variable the configuration reads', () => {
    expect([...read].filter((v) => !documented.has(v)).sort()).to.deep.equal([]);
  });

  it('documents no variable the configuration does not read', () => {
    expect([...documented].filter((v) => !read.has(v) && !source.includes(`'${v}'`)).sort()).to.deep.equal([]);
  });
});

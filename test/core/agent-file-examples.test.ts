/**
 * The example agents under examples/ parse and validate as they are, and name only what a
 * newcomer has: the built-in `local` model, or the catalogue models their comments add, and
 * peers of their own folder.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAgentFile, type AgentDocument } from '../../core/agent-file/index.js';

const root = join(import.meta.dirname, '..', '..', 'examples');
const files = ['companion.yaml', 'librarian.yaml', 'researcher.yaml', 'peers/ada.yaml', 'peers/bo.yaml'];

function load(name: string): AgentDocument {
  const r = parseAgentFile(readFileSync(join(root, name), 'utf8'), name);
  if (!r.ok) throw new Error(`${name}:\n${r.errors.join('\n')}`);
  return r.document;
}

describe('examples/', () => {
  it('holds the four examples and nothing else', () => {
    expect(
      [
        ...readdirSync(root).filter((n) => n.endsWith('.yaml')),
        ...readdirSync(join(root, 'peers')).map((n) => `peers/${n}`),
      ].sort(),
    ).toEqual([...files].sort());
  });

  it.each(files)('%s parses and validates', (name) => {
    const doc = load(name);
    expect(doc.id).toBe(name.replace(/^.*\//, '').replace('.yaml', ''));
    expect(doc.models?.agent?.length).toBeGreaterThan(0);
  });

  it('the companion runs on the offline model only; the researcher names the models its comment adds', () => {
    const names = (d: AgentDocument) =>
      [
        ...new Set([
          ...Object.entries(d.models ?? {})
            .filter(([k]) => k !== 'validators')
            .flatMap(([, v]) => v as string[]),
          ...(d.models?.validators ?? []).map((v) => v.model),
        ]),
      ].sort();
    expect(names(load('companion.yaml'))).toEqual(['local']);
    const researcher = readFileSync(join(root, 'researcher.yaml'), 'utf8');
    for (const n of names(load('researcher.yaml')).filter((n) => n !== 'local'))
      expect(researcher).toContain(`mindloop models add ${n} `);
    expect(load('researcher.yaml').models?.validators?.length).toBe(2);
  });

  it('the librarian works on ./workspace through the filesystem server, the model its comment adds', () => {
    const doc = load('librarian.yaml');
    const text = readFileSync(join(root, 'librarian.yaml'), 'utf8');
    expect(text).toContain(`mindloop models add ${doc.models!.agent![0]} `);
    const [files] = doc.tools!.mcp!;
    expect(files!.command).toEqual([
      'node',
      './node_modules/@modelcontextprotocol/server-filesystem/dist/index.js',
      './workspace',
    ]);
    // The server the example starts is installed with the project.
    expect(
      readdirSync(join(root, '..', 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist')),
    ).toContain('index.js');
    expect(files!.allowPaths).toEqual(['./workspace']);
    expect(files!.allowDestructive).toEqual(['move_file']);
  });

  it('the two peers name each other', () => {
    expect(load('peers/ada.yaml').peers?.map((p) => p.id)).toEqual(['bo']);
    expect(load('peers/bo.yaml').peers?.map((p) => p.id)).toEqual(['ada']);
  });
});

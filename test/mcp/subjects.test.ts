/**
 * Subjects from MCP clients (runtime/mcp/subjects.ts), pure: resolved under the root, relative
 * or absolute; hostile ones (`>`, a subject outside the root, spaces, `$JS.…`, empty tokens, a
 * wildcard where a message is sent) refused with the reason; the publish allow-list keeps
 * commands and meta out unless granted; NATS pattern matching, checked against a reference.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PublishAllowList, resolveSubject, SubjectRefusedError, subjectMatches } from '../../runtime/mcp/subjects.js';

const root = 'acme.mindloop';
const send = (s: string) => resolveSubject(root, s, { wildcards: false });
const listen = (s: string) => resolveSubject(root, s, { wildcards: true });

describe('resolveSubject', () => {
  it('takes subjects relative to the root or absolute under it', () => {
    expect(send('dev.request.echo')).toBe('acme.mindloop.dev.request.echo');
    expect(send('acme.mindloop.dev.request.echo')).toBe('acme.mindloop.dev.request.echo');
    expect(send('staging.high.agent.a~2Eb.reply')).toBe('acme.mindloop.staging.high.agent.a~2Eb.reply');
    expect(listen('high.agent.*.reply')).toBe('acme.mindloop.high.agent.*.reply');
    expect(listen('>')).toBe('acme.mindloop.>');
    expect(listen('acme.mindloop.command.>')).toBe('acme.mindloop.command.>');
  });

  it.each([
    ['>', /has a wildcard \(>\)/],
    ['dev.*', /has a wildcard/],
    ['acme.mindloop.command.>', /has a wildcard/],
    ['dev.request echo', /contains whitespace/],
    [' dev.x', /contains whitespace/],
    ['', /empty/],
    ['dev..x', /empty token/],
    ['dev.x.', /empty token/],
    ['$JS.API.STREAM.LIST', /token "\$JS"/],
    ['other.dev.x', /outside the bus root "acme.mindloop"/],
    ['mindloop.dev.x', /outside the bus root/],
    ['acme.mindloop', /outside the bus root/],
    ['staging', /names no namespace after staging/],
    ['staging.nope.x', /outside the bus root/],
    ['dev.a/b', /may hold only letters/],
    ['x'.repeat(600), /longer than 512/],
  ])('refuses %j where a message is sent', (raw, why) => {
    expect(() => send(raw)).toThrow(SubjectRefusedError);
    expect(() => send(raw)).toThrow(why);
  });

  it.each([
    ['dev.>.x', /">" may only be the last token/],
    ['$SYS.>', /token "\$SYS"/],
    ['other.>', /outside the bus root/],
    ['dev.\tx', /whitespace/],
  ])('refuses %j where a subject is listened to', (raw, why) => {
    expect(() => listen(raw)).toThrow(why);
  });

  it('property: whatever it accepts lies under the root, in a namespace, with no whitespace', () => {
    const token = fc.oneof(
      fc.constantFrom(
        'dev',
        'low',
        'high',
        'command',
        'meta',
        'staging',
        '*',
        '>',
        'acme',
        'mindloop',
        '',
        '$JS',
        'a b',
      ),
      fc.string({ maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(token, { minLength: 1, maxLength: 6 }), fc.boolean(), (tokens, wildcards) => {
        const raw = tokens.join('.');
        let out: string;
        try {
          out = resolveSubject(root, raw, { wildcards });
        } catch (err) {
          expect(err).toBeInstanceOf(SubjectRefusedError);
          return;
        }
        expect(out.startsWith(`${root}.`)).toBe(true);
        expect(out).not.toMatch(/\s/);
        const rest = out.slice(root.length + 1).split('.');
        const ns = rest[0] === 'staging' ? rest[1] : rest[0];
        expect(['dev', 'low', 'high', 'command', 'meta', '*', '>']).toContain(ns);
        if (!wildcards) expect(rest.some((t) => t === '*' || t === '>')).toBe(false);
      }),
    );
  });
});

describe('subjectMatches', () => {
  it('follows NATS: * is one token, a final > one or more', () => {
    expect(subjectMatches('a.*.c', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.*.c', 'a.b.d')).toBe(false);
    expect(subjectMatches('a.>', 'a.b')).toBe(true);
    expect(subjectMatches('a.>', 'a.b.c.d')).toBe(true);
    expect(subjectMatches('a.>', 'a')).toBe(false);
    expect(subjectMatches('a.b', 'a.b.c')).toBe(false);
    expect(subjectMatches('a.b.c', 'a.b')).toBe(false);
  });

  it('property: agrees with a regular-expression reference', () => {
    const tok = fc.constantFrom('a', 'b', 'c');
    const pat = fc
      .tuple(fc.array(fc.oneof(tok, fc.constant('*')), { maxLength: 4 }), fc.boolean())
      .map(([ts, tail]) => [...ts, ...(tail ? ['>'] : [])])
      .filter((ts) => ts.length > 0);
    fc.assert(
      fc.property(pat, fc.array(tok, { minLength: 1, maxLength: 5 }), (p, s) => {
        const re = new RegExp(
          `^${p.map((t) => (t === '*' ? '[^.]+' : t === '>' ? '[^.]+(?:\\.[^.]+)*' : t)).join('\\.')}$`,
        );
        expect(subjectMatches(p.join('.'), s.join('.'))).toBe(re.test(s.join('.')));
      }),
    );
  });
});

describe('PublishAllowList', () => {
  it('by default: dev, low, high and staging; never command or meta', () => {
    const allow = new PublishAllowList(root);
    for (const ok of ['dev.request.echo', 'high.agent.x.reply', 'low.agent.x', 'staging.command.agent.x.note'])
      expect(allow.allows(send(ok))).toBe(true);
    for (const no of ['command.agent.x.note', 'command.agent.x.pause', 'meta.health.buffer_drop', 'meta.attention.x']) {
      expect(allow.allows(send(no))).toBe(false);
      expect(() => allow.check(send(no))).toThrow(
        /not allowed: .*allow-list \(dev\.>, low\.>, high\.>, staging\.>\).*--allow <pattern>.*send_note/,
      );
    }
  });

  it('a grant (relative or absolute, with wildcards) widens it to exactly that', () => {
    const allow = new PublishAllowList(root, ['meta.attention.*', 'acme.mindloop.meta.health.web']);
    expect(allow.allows(send('meta.attention.focus'))).toBe(true);
    expect(allow.allows(send('meta.attention.focus.deeper'))).toBe(false);
    expect(allow.allows(send('meta.health.web'))).toBe(true);
    expect(allow.allows(send('meta.health.db'))).toBe(false);
    expect(allow.allows(send('command.agent.x.note'))).toBe(false);
  });

  it('a grant outside the root is a configuration error', () => {
    expect(() => new PublishAllowList(root, ['>'])).not.toThrow();
    expect(() => new PublishAllowList(root, ['$SYS.>'])).toThrow(/allow pattern "\$SYS\.>"/);
    expect(() => new PublishAllowList(root, ['foo bar'])).toThrow(/whitespace/);
  });
});

/**
 * Who may use the notebook. It binds 127.0.0.1 unless told otherwise, and any other address only
 * with a token (as the MCP bridge). Checked on every request, in this order:
 *
 * 1. the Host header (a loopback notebook answers only to loopback names, so a page on a DNS name
 *    rebound to 127.0.0.1 cannot read it) and the Origin of a request that has one (another
 *    site's page may not drive it);
 * 2. a change (POST) must be JSON: a cross-site HTML form cannot send that without the browser
 *    asking first, and nothing answers that question here;
 * 3. the token, when there is one: `Authorization: Bearer <token>`, or the cookie the page gets
 *    by opening `/?token=<token>` once (HttpOnly, SameSite=Strict), compared in constant time.
 */
import type { MiddlewareHandler } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { isLoopbackHost, minTokenLength, tokensEqual } from '../mcp/http.js';

const tokenCookie = 'mindloop_notebook';
const loopbackNames = ['localhost', '127.0.0.1', '[::1]', '::1'];

/** Refuse a bind that others could reach without a token; a refusal says what to add. */
export function checkExposure(host: string, token: string | undefined): void {
  if (token !== undefined && token.length < minTokenLength)
    throw new Error(`the notebook token must be at least ${minTokenLength} characters (e.g. \`openssl rand -hex 32\`)`);
  if (!isLoopbackHost(host) && token === undefined) {
    throw new Error(
      `refusing to serve the notebook on ${host} without a token: anyone who reaches it could stop agents and answer escalations. Set MINDLOOP_NOTEBOOK_TOKEN, or bind 127.0.0.1`,
    );
  }
}

/** Why the Host or Origin header is refused, or null. `names` null: any Host (a non-loopback bind), but an Origin must be the Host itself. */
function originProblem(
  host: string | undefined,
  origin: string | undefined,
  names: readonly string[] | null,
): string | null {
  if (!host) return 'missing Host header';
  let hostname: string;
  try {
    hostname = new URL(`http://${host}`).hostname;
  } catch {
    return 'invalid Host header';
  }
  if (names && !names.includes(hostname)) return `Host ${hostname} is not served here`;
  if (origin === undefined) return null;
  let o: URL;
  try {
    o = new URL(origin);
  } catch {
    return 'invalid Origin';
  }
  const allowed = names ? names.includes(o.hostname) : o.host === host;
  return allowed ? null : `Origin ${origin} is not allowed`;
}

export interface GuardOptions {
  host: string;
  token?: string;
  /** Host names accepted besides the loopback names (a non-loopback bind's own name is one). */
  allowedHosts?: readonly string[];
}

/** The middleware that applies the rules above to every request. */
export function guard(o: GuardOptions): MiddlewareHandler {
  checkExposure(o.host, o.token);
  const loopback = isLoopbackHost(o.host);
  const names =
    loopback || o.allowedHosts?.length
      ? [...loopbackNames, ...(loopback ? [] : [o.host]), ...(o.allowedHosts ?? [])]
      : null;
  const token = o.token;
  return async (c, next) => {
    const refused = originProblem(c.req.header('host'), c.req.header('origin'), names);
    if (refused) return c.json({ error: refused }, 403);
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
      const type = c.req.header('content-type') ?? '';
      if (!/^application\/json\b/i.test(type))
        return c.json({ error: 'send JSON (content-type: application/json)' }, 415);
    }
    if (token === undefined) return next();
    const given = /^Bearer (.+)$/i.exec(c.req.header('authorization') ?? '')?.[1] ?? getCookie(c, tokenCookie) ?? '';
    if (tokensEqual(given, token)) return next();
    const offered = c.req.method === 'GET' ? c.req.query('token') : undefined;
    if (offered !== undefined && tokensEqual(offered, token)) {
      // The token travels in the address once; from then on the cookie carries it and the address is clean.
      setCookie(c, tokenCookie, token, {
        httpOnly: true,
        sameSite: 'Strict',
        path: '/',
        secure: new URL(c.req.url).protocol === 'https:',
      });
      const url = new URL(c.req.url);
      url.searchParams.delete('token');
      return c.redirect(`${url.pathname}${url.search}`, 303);
    }
    c.header('www-authenticate', 'Bearer');
    return c.json(
      { error: 'unauthorized: open the notebook as /?token=<token>, or send Authorization: Bearer <token>' },
      401,
    );
  };
}

/**
 * Hash routes (`#/runs/ID`): the server serves one page at /console, and a route never
 * reaches the server, so no secret or filter ends up in its logs. Query parameters after
 * the path (`#/runs?status=failed`) keep a list's filters in the address, to share or reload.
 */
import { useEffect, useState } from 'preact/hooks';

export interface Route {
  /** Path segments after `#/`: `#/runs/abc` is ['runs', 'abc']. */
  parts: string[];
  query: URLSearchParams;
}

export function currentRoute(): Route {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = hash.split('?', 2);
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(search) };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const on = () => setRoute(currentRoute());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

/** The href of a route: href('runs', id) is `#/runs/<id>`; a query object is appended. */
export function href(...parts: Array<string | Record<string, string | undefined>>): string {
  const segments: string[] = [];
  let query = '';
  for (const p of parts) {
    if (typeof p === 'string') segments.push(encodeURIComponent(p));
    else {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(p)) if (v !== undefined && v !== '') q.set(k, v);
      query = q.toString();
    }
  }
  return `#/${segments.join('/')}${query ? `?${query}` : ''}`;
}

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (opts.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  dispatchEvent(new HashChangeEvent('hashchange'));
}

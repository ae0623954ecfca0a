import { useEffect, useState } from 'react';

// The console's few routes, on history.pushState; the Go server answers every one of
// these paths with index.html.
export type Route =
  | { name: 'home' }
  | { name: 'session'; id: string }
  | { name: 'shared'; token: string };

export function parseRoute(path: string): Route {
  const s = /^\/sessions\/([^/]+)/.exec(path);
  if (s?.[1]) return { name: 'session', id: decodeURIComponent(s[1]) };
  const sh = /^\/s\/([^/]+)/.exec(path);
  if (sh?.[1]) return { name: 'shared', token: decodeURIComponent(sh[1]) };
  return { name: 'home' };
}

export function navigate(path: string) {
  if (location.pathname === path) return;
  history.pushState(null, '', path);
  dispatchEvent(new PopStateEvent('popstate'));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.pathname));
    addEventListener('popstate', on);
    return () => removeEventListener('popstate', on);
  }, []);
  return route;
}

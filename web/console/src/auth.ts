// The signed-in token lives in this browser's localStorage. A link with #token=... (as
// `make run` prints) signs in and the fragment is removed at once; a fragment is never
// sent to a server, so the token stays out of access logs and Referer headers.
const KEY = 'astrabox.token';

export function takeTokenFromFragment(): void {
  const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (!m?.[1]) return;
  localStorage.setItem(KEY, decodeURIComponent(m[1]));
  history.replaceState(null, '', location.pathname + location.search);
}

export const getToken = (): string | null => localStorage.getItem(KEY);
export const setToken = (t: string) => localStorage.setItem(KEY, t.trim());
export const signOut = () => localStorage.removeItem(KEY);

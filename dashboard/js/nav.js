// Navigation and announcements, shared by every view.

/**
 * Goes to `#/<path>?<query>` (empty values dropped); the router renders on hashchange. Setting the hash it
 * already has fires no hashchange (signing in on a bookmarked #/payments, Apply or Clear with the filters
 * unchanged), so then the router is told to render all the same.
 */
export function go(path, query) {
  const qs = query ? new URLSearchParams([...query].filter(([, v]) => v !== '')).toString() : '';
  const before = window.location.hash;
  window.location.hash = `#/${path}${qs ? `?${qs}` : ''}`;
  if (window.location.hash === before) window.dispatchEvent(new HashChangeEvent('hashchange'));
}

let timer;
/** A short confirmation read out by screen readers (role=status) and shown above the page. */
export function announce(message) {
  const region = document.getElementById('status');
  region.textContent = message;
  clearTimeout(timer);
  timer = setTimeout(() => (region.textContent = ''), 8000);
}

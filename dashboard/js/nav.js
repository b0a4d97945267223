// Navigation and announcements, shared by every view.

/** Goes to `#/<path>?<query>` (empty values dropped); the router renders on hashchange. */
export function go(path, query) {
  const qs = query ? new URLSearchParams([...query].filter(([, v]) => v !== '')).toString() : '';
  window.location.hash = `#/${path}${qs ? `?${qs}` : ''}`;
}

let timer;
/** A short confirmation read out by screen readers (role=status) and shown above the page. */
export function announce(message) {
  const region = document.getElementById('status');
  region.textContent = message;
  clearTimeout(timer);
  timer = setTimeout(() => (region.textContent = ''), 8000);
}

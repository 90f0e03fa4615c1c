// One history entry per page opened (issue 42). A page link pushes the page's path, and the page's first run then
// writes its settings into the query, which Streamlit pushes as an entry of its own: the first Back showed the same
// page again. Here the query written right after a page opens replaces the entry the link pushed; once the reader
// presses a key or a pointer, the settings they change push entries as before (Back undoes a slider move).

export default function () {
  if (window.mhaHistoryGuard) return;
  window.mhaHistoryGuard = true;
  const push = window.history.pushState.bind(window.history);
  let opened = false; // a page was just opened, and has not yet written its query
  const touched = () => {
    opened = false;
  };
  window.addEventListener("keydown", touched, true);
  window.addEventListener("pointerdown", touched, true);
  window.history.pushState = function (state, unused, url) {
    const next = url == null ? null : new URL(url, window.location.href);
    if (next && opened && next.pathname === window.location.pathname) {
      opened = false;
      return window.history.replaceState(state, unused, url);
    }
    opened = next !== null && next.pathname !== window.location.pathname;
    return push(state, unused, url);
  };
}

// legate web UI: live updates over server-sent events, and small helpers.
// No inline scripts: the Content-Security-Policy allows this file only.
"use strict";

(function () {
  function ago(seconds) {
    if (seconds < 1) return "just now";
    if (seconds < 60) return Math.floor(seconds) + "s ago";
    if (seconds < 3600) return Math.floor(seconds / 60) + "m ago";
    if (seconds < 172800) return Math.floor(seconds / 3600) + "h ago";
    return Math.floor(seconds / 86400) + "d ago";
  }

  // Heartbeat ages stay current without asking the server.
  function refreshAges() {
    var now = Date.now();
    document.querySelectorAll("time[data-age]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(t)) el.textContent = ago(Math.max(0, (now - t) / 1000));
    });
  }

  function setLive(el, on, text) {
    if (!el) return;
    el.textContent = text;
    el.classList.toggle("on", on);
    el.classList.toggle("off", !on);
  }

  function signedOut() {
    window.location.assign("/signin?next=" + encodeURIComponent(window.location.pathname + window.location.search));
  }

  // Delegates: the list is rendered again by the server on every change.
  function liveDelegates() {
    var list = document.getElementById("delegate-list");
    if (!list || !window.EventSource) return;
    var status = document.getElementById("live-status");
    var es = new EventSource(list.getAttribute("data-events"));
    es.addEventListener("open", function () { setLive(status, true, "Live"); });
    es.addEventListener("error", function () { setLive(status, false, "Live updates reconnecting…"); });
    es.addEventListener("delegates", function (e) {
      list.innerHTML = e.data;
      list.setAttribute("data-updated", String(Date.now()));
      refreshAges();
      setLive(status, true, "Live");
    });
    es.addEventListener("signedout", function () { es.close(); signedOut(); });
  }

  // A task's output, streamed until the task ends.
  function liveOutput() {
    var out = document.getElementById("output");
    if (!out || !window.EventSource) return;
    var status = document.getElementById("output-status");
    var es = new EventSource(out.getAttribute("data-stream"));
    var follow = true;
    out.addEventListener("scroll", function () {
      follow = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
    });
    es.addEventListener("open", function () { setLive(status, true, "Live output"); });
    es.addEventListener("error", function () {
      if (es.readyState !== EventSource.CLOSED) setLive(status, false, "Live output reconnecting…");
    });
    es.addEventListener("output", function (e) {
      var c = JSON.parse(e.data);
      var node;
      if (c.marker) {
        node = document.createElement("mark");
        node.textContent = c.data;
      } else {
        node = document.createTextNode(c.data);
      }
      out.appendChild(node);
      if (follow) out.scrollTop = out.scrollHeight;
    });
    es.addEventListener("end", function (e) {
      es.close();
      var t = JSON.parse(e.data);
      var st = document.getElementById("task-status");
      if (st) {
        st.textContent = t.status.replace(/_/g, " ");
        st.className = "state s-" + t.status;
      }
      var form = document.getElementById("cancel-form");
      if (form) form.remove();
      setLive(status, true, "Task " + t.status.replace(/_/g, " ") + (t.exit_code !== null && t.exit_code !== undefined ? " (exit code " + t.exit_code + ")" : "") + (t.error ? ": " + t.error : "") + ". Output complete.");
      status.setAttribute("data-ended", t.status);
    });
    es.addEventListener("failure", function (e) {
      es.close();
      setLive(status, false, JSON.parse(e.data).error);
    });
    es.addEventListener("signedout", function () { es.close(); signedOut(); });
  }

  // Forms that ask first (delete).
  function confirmations() {
    document.addEventListener("submit", function (e) {
      var msg = e.target.getAttribute && e.target.getAttribute("data-confirm");
      if (msg && !window.confirm(msg)) e.preventDefault();
    });
  }

  // The page after a sign-in link moves on by itself.
  function autofollow() {
    var a = document.querySelector("a[data-autofollow]");
    if (a) window.location.replace(a.getAttribute("href"));
  }

  document.addEventListener("DOMContentLoaded", function () {
    refreshAges();
    setInterval(refreshAges, 1000);
    liveDelegates();
    liveOutput();
    confirmations();
    autofollow();
  });
})();

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
    var announce = document.getElementById("list-announce");
    es.addEventListener("delegates", function (e) {
      list.innerHTML = e.data;
      list.setAttribute("data-updated", String(Date.now()));
      refreshAges();
      setLive(status, true, "Live");
      // Screen readers hear the summary of a change, not the whole list.
      var summary = document.getElementById("delegate-summary");
      if (announce && summary && announce.textContent !== summary.textContent) {
        announce.textContent = summary.textContent;
      }
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
    // The task's status and timeline, whenever they change.
    es.addEventListener("task", function (e) {
      var t = JSON.parse(e.data);
      var st = document.getElementById("task-status");
      if (st) {
        st.textContent = t.status.replace(/_/g, " ");
        st.className = "state s-" + t.status;
      }
      var dg = document.getElementById("task-delegate");
      if (dg && t.delegate) dg.textContent = t.delegate;
      var tl = document.getElementById("timeline");
      if (!tl) return;
      t.timeline.forEach(function (step) {
        var li = tl.querySelector('li[data-label="' + step.label + '"]');
        if (!li || !step.at) return;
        li.classList.remove("pending");
        var label = document.createElement("span");
        label.className = "label";
        label.textContent = step.label;
        var time = document.createElement("time");
        time.setAttribute("datetime", step.at);
        time.textContent = step.clock;
        li.replaceChildren(label, document.createTextNode(" "), time);
      });
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

  // A pipeline run: the server sends its stages and steps again whenever
  // the manager advanced it, until it has ended.
  function liveRun() {
    var box = document.getElementById("run-live");
    if (!box || !box.getAttribute("data-events") || !window.EventSource) return;
    var status = document.getElementById("run-live-status");
    var es = new EventSource(box.getAttribute("data-events"));
    es.addEventListener("open", function () { setLive(status, true, "Live"); });
    es.addEventListener("error", function () {
      if (es.readyState !== EventSource.CLOSED) setLive(status, false, "Live updates reconnecting…");
    });
    es.addEventListener("run", function (e) {
      box.innerHTML = e.data;
      box.setAttribute("data-updated", String(Date.now()));
    });
    es.addEventListener("end", function (e) {
      es.close();
      setLive(status, true, "Run " + e.data.replace(/_/g, " ") + ".");
      status.setAttribute("data-ended", e.data);
    });
    es.addEventListener("signedout", function () { es.close(); signedOut(); });
  }

  // The New delegate page: copy and download the spec, and say when the
  // delegate connects (the delegate list under it is live), or after a
  // while what to check.
  function newDelegate() {
    var pre = document.getElementById("manifest");
    if (!pre) return;
    var status = document.getElementById("copy-status");
    var copy = document.getElementById("copy-spec");
    copy.addEventListener("click", function () {
      if (!navigator.clipboard) { status.textContent = "Select the text and copy it."; return; }
      navigator.clipboard.writeText(pre.textContent).then(
        function () { status.textContent = "Copied."; },
        function () { status.textContent = "The browser refused: select the text and copy it."; });
    });
    var dl = document.getElementById("download-spec");
    dl.addEventListener("click", function () {
      var url = URL.createObjectURL(new Blob([pre.textContent], { type: "text/plain" }));
      var a = document.createElement("a");
      a.href = url;
      a.download = dl.getAttribute("data-filename");
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
    });
    var wait = document.getElementById("wait-status");
    var list = document.getElementById("delegate-list");
    var name = wait.getAttribute("data-delegate");
    var connected = false;
    new MutationObserver(function () {
      var groups = list.querySelectorAll("tbody.group");
      for (var i = 0; i < groups.length; i++) {
        if (groups[i].getAttribute("data-delegate") === name && groups[i].querySelector(".state.connected")) {
          connected = true;
          setLive(wait, true, "Connected: " + name + " registered with the manager.");
          wait.setAttribute("data-connected", "true");
          var hint = document.getElementById("wait-hint");
          if (hint) hint.hidden = true;
          return;
        }
      }
    }).observe(list, { childList: true, subtree: true });
    var after = parseInt(wait.getAttribute("data-hint-after"), 10);
    setTimeout(function () {
      if (connected) return;
      waitHint(wait, name);
    }, isNaN(after) ? 120000 : after);
  }

  // The New delegate page after a while without the delegate: the
  // checks the server wrote under the status, shown.
  function waitHint(wait, name) {
    var hint = document.getElementById("wait-hint");
    setLive(wait, false, "Nothing yet from " + name + ": see what to check below. This page keeps waiting.");
    wait.setAttribute("data-hint", "shown");
    if (hint) hint.hidden = false;
  }

  // Tasks: the first page is rendered again by the server after tasks
  // change (at most once a second); a later page only says that newer
  // tasks arrived.
  function liveTasks() {
    var list = document.getElementById("task-list");
    if (!list || !window.EventSource) return;
    var status = document.getElementById("tasks-live-status");
    var es = new EventSource(list.getAttribute("data-events"));
    es.addEventListener("open", function () { setLive(status, true, "Live"); });
    es.addEventListener("error", function () {
      if (es.readyState !== EventSource.CLOSED) setLive(status, false, "Live updates reconnecting…");
    });
    var announce = document.getElementById("tasks-announce");
    es.addEventListener("tasks", function (e) {
      list.innerHTML = e.data;
      list.setAttribute("data-updated", String(Date.now()));
      setLive(status, true, "Live");
      var summary = document.getElementById("task-summary");
      if (announce && summary && announce.textContent !== summary.textContent) {
        announce.textContent = summary.textContent;
      }
    });
    es.addEventListener("newer", function () {
      es.close();
      var notice = document.getElementById("tasks-newer");
      if (notice) notice.hidden = false;
      if (announce) announce.textContent = "Newer tasks arrived.";
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

  document.addEventListener("DOMContentLoaded", function () {
    refreshAges();
    setInterval(refreshAges, 1000);
    liveDelegates();
    liveTasks();
    liveOutput();
    liveRun();
    newDelegate();
    confirmations();
  });
})();

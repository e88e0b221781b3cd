// Follows a task's log: with script on, the Follow button streams what
// the task writes after the page was rendered and appends it to the log.
// Without script the page still shows the log's last 64 KiB.
(function () {
  "use strict";
  var pre = document.getElementById("log");
  var box = document.getElementById("follow");
  var button = document.getElementById("follow-button");
  var status = document.getElementById("follow-status");
  if (!pre || !box || !button || !window.fetch || !window.TextDecoder) {
    return;
  }
  var controller = null;
  var maxChars = 1 << 20; // keep the page light: drop the oldest text

  function append(text) {
    var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    var all = pre.textContent + text;
    if (all.length > maxChars) {
      all = all.slice(all.length - maxChars);
    }
    pre.textContent = all;
    if (atEnd) {
      pre.scrollTop = pre.scrollHeight;
    }
  }

  function stop(message) {
    if (controller) {
      controller.abort();
      controller = null;
    }
    button.textContent = "Follow";
    button.setAttribute("aria-pressed", "false");
    status.textContent = message || "";
  }

  // follow streams the log from as far back as the page shows (its
  // last data-tail bytes, read again now) and replaces the page's text
  // with it when the first bytes come: the lines the task wrote between
  // the page's load and the click are neither lost nor shown twice.
  function follow() {
    controller = new AbortController();
    button.textContent = "Stop following";
    button.setAttribute("aria-pressed", "true");
    status.textContent = "Following…";
    var decoder = new TextDecoder();
    var fresh = true;
    var back = parseInt(pre.dataset.tail, 10) || 0;
    fetch(pre.dataset.stream + "&offset=" + back, { credentials: "same-origin", signal: controller.signal })
      .then(function (resp) {
        if (!resp.ok) {
          return resp.text().then(function (t) { throw new Error(t || resp.statusText); });
        }
        var reader = resp.body.getReader();
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) {
              stop("The log ended.");
              return;
            }
            var text = decoder.decode(r.value, { stream: true });
            if (fresh && text) {
              fresh = false;
              // The window may start inside a character.
              pre.textContent = "";
              text = text.replace(/^\uFFFD+/, "");
            }
            append(text);
            return pump();
          });
        }
        return pump();
      })
      .catch(function (err) {
        if (err.name !== "AbortError") {
          stop("Following stopped: " + err.message);
        }
      });
  }

  button.addEventListener("click", function () {
    if (controller) {
      stop("");
    } else {
      follow();
    }
  });
  box.hidden = false;
})();

/*
 * feedback.js: the up / down buttons, the "wrong specialist: should have been …" picker and a
 * free-text note under a reply. Each choice sends the whole verdict so far to POST /v1/feedback
 * ({response_id, rating, expected_specialist, comment}; the server appends it, so its latest row is
 * the verdict; with `serve --experience` it is linked to the recorded turn) and is remembered
 * in the reply's entry so a reload shows it. Knows nothing of how the chat stores conversations:
 * `onChange` does.
 */

/** The feedback bar for a reply whose response id is `responseId`. `roles` are the specialists,
 * `current` what the entry remembers ({rating, expected}), `post(body)` sends one row. */
export function feedbackBar(responseId, { roles, current = {}, post, onChange }) {
  const bar = document.createElement("div");
  bar.className = "feedback";
  const state = { rating: current.rating || null, expected: current.expected || null,
    comment: current.comment || null };
  const status = document.createElement("span");
  status.className = "muted fb-status";

  async function record(change) {
    const next = { ...state, ...change };
    try {
      await post({ response_id: responseId, rating: next.rating, expected_specialist: next.expected,
        comment: next.comment });
      Object.assign(state, next);
      paint();
      status.textContent = "thanks";
      status.dataset.sent = String(Number(status.dataset.sent || 0) + 1);
      onChange && onChange({ ...state });
    } catch (e) {
      paint(); // back to what the server has
      status.textContent = "feedback not sent: " + e.message;
    }
  }

  const buttons = {};
  for (const [rating, label, title] of [["up", "▲ Good", "a good reply"], ["down", "▼ Bad", "a bad reply"]]) {
    const btn = document.createElement("button");
    btn.type = "button";
    btn.className = "quiet fb-" + rating;
    btn.textContent = label;
    btn.title = title;
    btn.addEventListener("click", () => record({ rating }));
    buttons[rating] = btn;
    bar.appendChild(btn);
  }
  const pick = document.createElement("select");
  pick.className = "fb-specialist";
  pick.title = "the specialist that should have answered";
  const none = document.createElement("option");
  none.value = "";
  none.textContent = "wrong specialist? should have been …";
  pick.appendChild(none);
  for (const r of roles) {
    const opt = document.createElement("option");
    opt.value = r;
    opt.textContent = `wrong specialist: should have been ${r}`;
    pick.appendChild(opt);
  }
  pick.addEventListener("change", () => {
    if (pick.value) record({ expected: pick.value });
  });
  const note = document.createElement("input");
  note.className = "fb-comment";
  note.maxLength = 4000;
  note.placeholder = "say more (optional)";
  note.title = "a note on this reply, sent with your verdict";
  const send = document.createElement("button");
  send.type = "button";
  send.className = "quiet fb-send";
  send.textContent = "Send note";
  const sendNote = () => {
    const text = note.value.trim();
    if (text && text !== state.comment) record({ comment: text });
  };
  send.addEventListener("click", sendNote);
  note.addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); sendNote(); }
  });
  bar.append(pick, note, send, status);

  function paint() {
    for (const [r, btn] of Object.entries(buttons)) btn.setAttribute("aria-pressed", String(state.rating === r));
    pick.value = state.expected || "";
    note.value = state.comment || "";
  }
  paint();
  return bar;
}

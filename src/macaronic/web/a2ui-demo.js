// The A2UI demo page (a2ui-demo.html): render the pasted messages; a file, not inline (the CSP).
import { renderCard } from "./a2ui-card.js";

function show() {
  const parsed = JSON.parse(document.getElementById("input").value);
  const messages = Array.isArray(parsed) ? parsed : parsed.a2ui;
  const target = document.getElementById("surface");
  try {
    renderCard(target, messages, {
      onAction: (m) => { document.getElementById("actions").textContent += JSON.stringify(m) + "\n"; },
    });
  } catch (e) {
    target.textContent = "card error: " + e.message;
  }
}
document.getElementById("go").addEventListener("click", show);
show();

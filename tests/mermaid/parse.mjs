// Reads a JSON list of Mermaid sources on stdin; prints a JSON list of errors ("" when one parses).
// mermaid.parse needs a DOM only for DOMPurify, which it loads at import: jsdom supplies one.
import { JSDOM } from "jsdom";

const { window } = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = window;
globalThis.document = window.document;
const { default: mermaid } = await import("mermaid");

let input = "";
for await (const chunk of process.stdin) input += chunk;
const errors = [];
for (const source of JSON.parse(input)) {
  try {
    await mermaid.parse(source);
    errors.push("");
  } catch (error) {
    errors.push(String(error.message || error).split("\n").slice(0, 4).join(" "));
  }
}
process.stdout.write(JSON.stringify(errors));

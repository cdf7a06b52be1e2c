// GPT-2 token ids of hard strings from gpt-3-encoder (an independent JS implementation of GPT-2's
// BPE), for the engine's tokenizer test: node e2e/gpt2_reference_ids.cjs > engine/src/pretrained/tokenizer_reference.in
const { encode } = require("gpt-3-encoder");
const strings = [
  "Hello world",
  " leading space and  two spaces",
  "trailing spaces   ",
  "line one\nline two\n\n\tindented\r\n",
  "Digits 1234567890 and 3.14159, 2026-12-03",
  "Accents: café, naïve, Ærø, Ångström, señor",
  "Emoji: 👩‍🔬 🚀🎉 and ❤️",
  "中文字符 and 日本語のテキスト",
  "It's they're we've I'm you'll he'd",
  "<|endoftext|> is text here",
  "    code(x) { return x**2; } // comment",
  "The Brownian motion in the transformer model.",
];
const rust = (s) => JSON.stringify(s);
console.log("[");
for (const s of strings) console.log(`    (${rust(s)}, &${JSON.stringify(encode(s))}),`);
console.log("]");

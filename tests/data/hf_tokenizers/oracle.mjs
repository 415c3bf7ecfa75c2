// Tokenizer fixtures and the oracle of tests/data/hf_tokenizers: makes tokenizer.json files the
// way ctgrad's users get them (a byte-level BPE learnt here, GPT-2 and Llama 3 style; a WordPiece
// vocabulary, BERT style; SentencePiece BPE with byte fallback, Llama 2 style, and Unigram, T5
// style, both trained by spm_train and converted as Hugging Face's converter does), a few hundred
// varied lines, and what Hugging Face's own implementation (npm @huggingface/tokenizers, pure
// JavaScript) encodes and decodes; then runs ctgrad's checker on each fixture. The Precompiled
// normalizer, which the JavaScript port only approximates, is checked against spm_normalize.
//   node oracle.mjs WORK NODE_MODULES CHECKER
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const [work, modules, checker] = process.argv.slice(2);
const pkg = path.join(modules, "@huggingface/tokenizers/dist/tokenizers.mjs");
if (!fs.existsSync(pkg)) {
  console.error(`oracle.mjs: ${pkg} is missing: scripts/setup.sh --tests installs @huggingface/tokenizers`);
  process.exit(2);
}
const { Tokenizer } = await import(pkg);
fs.mkdirSync(work, { recursive: true });

// --- text: training corpus and test lines, from a seeded generator ---------------------------
let seed = 12345;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = (a) => a[Math.floor(rand() * a.length)];
const words = {
  en: "the quick brown fox jumps over lazy dog and god said let there be light in beginning was word heaven earth water running played playing players doesn't can't I'm you're we've they'll it's".split(" "),
  fr: "élève café déjà où naïve forêt garçon Noël été hôtel".split(" "),
  de: "Straße Mädchen über Größe schön Übung Äpfel".split(" "),
  el: "Καλημέρα κόσμε λόγος θεός ἀρχῇ".split(" "),
  ru: "Привет мир слово бог земля".split(" "),
  zh: "你好 世界 中文 汉字 北京".split(" "),
  ja: "こんにちは カタカナ 日本語".split(" "),
  ar: "مرحبا بالعالم كلمة".split(" "),
  hi: "नमस्ते दुनिया शब्द".split(" "),
  ko: "안녕하세요 세계".split(" "),
};
const emoji = ["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️", "🚀"];
const punct = [".", ",", "!", "?", ";", ":", "...", "—", "(", ")", "\"", "'", "-", "/", "#", "$", "%", "&", "@"];
const spaces = [" ", " ", " ", "  ", "   ", "\t", "\n", " \n ", "\u00a0", "\u3000", "\r\n"];
const numbers = () => String(Math.floor(rand() * 1e6) / (rand() < 0.3 ? 100 : 1));
function line(specials) {
  const langs = Object.keys(words);
  const n = 1 + Math.floor(rand() * 14);
  let s = rand() < 0.15 ? pick(spaces) : "";
  for (let i = 0; i < n; i++) {
    const r = rand();
    let w = r < 0.55 ? pick(words.en) : r < 0.75 ? pick(words[pick(langs)]) : r < 0.82 ? pick(emoji) : r < 0.9 ? numbers() : pick(punct);
    if (rand() < 0.15) w = w[0].toUpperCase() + w.slice(1);
    if (specials.length && rand() < 0.08) w = pick(specials) + (rand() < 0.5 ? w : "");
    s += w + (i + 1 < n ? (rand() < 0.8 ? " " : pick(spaces)) : "");
  }
  if (rand() < 0.1) s += pick(spaces);
  return s;
}
const corpus = [];
for (let i = 0; i < 3000; i++) corpus.push(line([]));
fs.writeFileSync(path.join(work, "corpus.txt"), corpus.join("\n") + "\n");

// --- fixtures ---------------------------------------------------------------------------------
const byteChars = (() => {
  const t = [];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    t.push(String.fromCodePoint(printable ? b : 256 + n++));
  }
  return t;
})();
const GPT2 = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// A byte-level BPE learnt on the corpus: words by GPT-2's expression, their bytes as GPT-2's characters.
function learnByteBpe(merges) {
  const counts = new Map();
  for (const l of corpus)
    for (const m of l.matchAll(GPT2)) {
      const w = [...Buffer.from(m[0], "utf8")].map((b) => byteChars[b]);
      const k = w.join("\u0000");
      counts.set(k, (counts.get(k) || 0) + 1);
    }
  let ws = [...counts].map(([k, c]) => [k.split("\u0000"), c]);
  const vocab = {};
  byteChars.forEach((c, i) => (vocab[c] = i));
  const out = [];
  for (let m = 0; m < merges; m++) {
    const pairs = new Map();
    for (const [w, c] of ws) for (let i = 0; i + 1 < w.length; i++) { const p = w[i] + " " + w[i + 1]; pairs.set(p, (pairs.get(p) || 0) + c); }
    let best = null, bestCount = 0;
    for (const [p, c] of pairs) if (c > bestCount || (c === bestCount && p < best)) (best = p), (bestCount = c);
    if (!best) break;
    const [a, b] = best.split(" ");
    if (vocab[a + b] === undefined) vocab[a + b] = Object.keys(vocab).length;
    out.push(best);
    ws = ws.map(([w, c]) => {
      const r = [];
      for (let i = 0; i < w.length; i++) if (i + 1 < w.length && w[i] === a && w[i + 1] === b) r.push(a + b), i++; else r.push(w[i]);
      return [r, c];
    });
  }
  return { vocab, merges: out };
}
const added = (id, content, special = true, extra = {}) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special, ...extra });
const fixtures = {};
{
  const { vocab, merges } = learnByteBpe(400);
  const n = Object.keys(vocab).length;
  fixtures["gpt2-bpe"] = {
    json: { version: "1.0", truncation: null, padding: null, added_tokens: [added(n, "<|endoftext|>")], normalizer: null,
            pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
            post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true }, decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
            model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab, merges } },
    specials: ["<|endoftext|>"],
  };
  fixtures["llama3-bpe"] = {
    json: { version: "1.0", truncation: null, padding: null,
            added_tokens: [added(n, "<|begin_of_text|>"), added(n + 1, "<|eot_id|>"), added(n + 2, " <mark>", false, { lstrip: true, rstrip: true })],
            normalizer: null,
            pre_tokenizer: { type: "Sequence", pretokenizers: [{ type: "Split", pattern: { Regex: LLAMA3 }, behavior: "Isolated", invert: false },
                                                               { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] },
            post_processor: { type: "Sequence", processors: [{ type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
              { type: "TemplateProcessing", single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
                pair: [{ Sequence: { id: "A", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
                special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [n], tokens: ["<|begin_of_text|>"] } } }] },
            decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
            model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false,
                     ignore_merges: true, vocab, merges } },
    specials: ["<|begin_of_text|>", "<|eot_id|>", "<mark>"],
  };
}
{
  // WordPiece: BERT's normalizer (lower-casing, accents stripped), the corpus's characters and frequent words.
  const freq = new Map(), chars = new Set();
  for (const l of corpus.slice(0, 1500)) {
    const norm = l.toLowerCase().normalize("NFD").replace(/\p{Mn}/gu, "");
    for (const w of norm.split(/[\s\p{P}]+/u)) if (w) freq.set(w, (freq.get(w) || 0) + 1);
    for (const c of norm) if (!/\s/u.test(c)) chars.add(c);
  }
  const vocab = {};
  for (const t of ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) vocab[t] = Object.keys(vocab).length;
  for (const c of [...chars].sort()) { vocab[c] = Object.keys(vocab).length; vocab["##" + c] = Object.keys(vocab).length; }
  for (const [w] of [...freq].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 150)) if (vocab[w] === undefined) vocab[w] = Object.keys(vocab).length;
  for (const s of ["##s", "##ing", "##ed", "##er", "##ly"]) if (vocab[s] === undefined) vocab[s] = Object.keys(vocab).length;
  fixtures["bert-wordpiece"] = {
    json: { version: "1.0", truncation: null, padding: null, added_tokens: ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map((t) => added(vocab[t], t)),
            normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
            pre_tokenizer: { type: "BertPreTokenizer" },
            post_processor: { type: "TemplateProcessing", single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } }],
                              pair: [], special_tokens: { "[CLS]": { id: "[CLS]", ids: [vocab["[CLS]"]], tokens: ["[CLS]"] }, "[SEP]": { id: "[SEP]", ids: [vocab["[SEP]"]], tokens: ["[SEP]"] } } },
            decoder: { type: "WordPiece", prefix: "##", cleanup: true },
            model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab } },
    specials: ["[CLS]", "[SEP]", "[MASK]"],
  };
  // Added tokens matched in the normalized text (normalized: true, the default of a non-special
  // one): "covid" and "new york" found in "COVID", "New York" after lower-casing.
  const n = Object.keys(vocab).length;
  fixtures["bert-added-normalized"] = {
    json: { ...fixtures["bert-wordpiece"].json,
            added_tokens: [...fixtures["bert-wordpiece"].json.added_tokens, added(n, "covid", false, { normalized: true }), added(n + 1, "New York", false, { normalized: true })] },
    specials: ["COVID", "Covid", "covid", "New York", "NEW YORK", "[SEP]"],
  };
}
// SentencePiece models trained by spm_train, converted as transformers' convert_slow_tokenizer does.
function spm(type, size, extra) {
  const prefix = path.join(work, "spm-" + type);
  execFileSync("spm_train", [`--input=${path.join(work, "corpus.txt")}`, `--model_prefix=${prefix}`, `--vocab_size=${size}`, `--model_type=${type}`,
                             "--character_coverage=0.9995", "--minloglevel=2", "--num_threads=1", "--random_seed=1", ...extra], { stdio: "ignore" });
  execFileSync("spm_export_vocab", [`--model=${prefix}.model`, `--output=${prefix}.vocab`], { stdio: "ignore" });
  return fs.readFileSync(prefix + ".vocab", "utf8").trimEnd().split("\n").map((l) => { const [p, s] = l.split("\t"); return [p, Number(s)]; });
}
{
  const pieces = spm("bpe", 600, ["--byte_fallback=true", "--split_digits=true"]);
  const vocab = {};
  pieces.forEach(([p], i) => (vocab[p] = i));
  const merges = [];
  pieces.forEach(([p, score], id) => {
    const local = [];
    const cps = [...p];
    for (let k = 1; k < cps.length; k++) {
      const l = cps.slice(0, k).join(""), r = cps.slice(k).join("");
      if (vocab[l] !== undefined && vocab[r] !== undefined) local.push([l, r, id]);
    }
    local.sort((a, b) => vocab[a[0]] - vocab[b[0]] || vocab[a[1]] - vocab[b[1]]);
    merges.push(...local);
  });
  merges.sort((a, b) => a[2] - b[2]);  // by the merged piece's rank
  fixtures["llama2-spm-bpe"] = {
    json: { version: "1.0", truncation: null, padding: null, added_tokens: [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
            normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "▁" }, { type: "Replace", pattern: { String: " " }, content: "▁" }] },
            pre_tokenizer: null,
            post_processor: { type: "TemplateProcessing", single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }], pair: [],
                              special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } } },
            decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "▁" }, content: " " }, { type: "ByteFallback" }, { type: "Fuse" },
                                                    { type: "Strip", content: " ", start: 1, stop: 0 }] },
            model: { type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true,
                     ignore_merges: false, vocab, merges: merges.map(([l, r]) => [l, r]) } },
    specials: ["<s>", "</s>"],
  };
}
{
  const pieces = spm("unigram", 500, []);
  fixtures["t5-spm-unigram"] = {
    json: { version: "1.0", truncation: null, padding: null, added_tokens: [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
            normalizer: { type: "Sequence", normalizers: [{ type: "NFKC" }, { type: "Replace", pattern: { Regex: " {2,}" }, content: " " }] },
            pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
            post_processor: { type: "TemplateProcessing", single: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }], pair: [],
                              special_tokens: { "</s>": { id: "</s>", ids: [2], tokens: ["</s>"] } } },
            decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
            model: { type: "Unigram", unk_id: 0, vocab: pieces, byte_fallback: false } },
    specials: ["</s>"],
  };
  // The same pieces with spaces kept (no Replace): Metaspace's split of a run of spaces.
  fixtures["metaspace-unigram"] = {
    json: { ...fixtures["t5-spm-unigram"].json, normalizer: { type: "NFKC" }, post_processor: null },
    specials: [],
  };
}

// --- the oracle ---------------------------------------------------------------------------------
let failed = 0;
for (const [name, f] of Object.entries(fixtures)) {
  const dir = path.join(work, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(f.json, null, 1));
  const tok = new Tokenizer(f.json, {});
  f.modelSize = Array.isArray(f.json.model.vocab) ? f.json.model.vocab.length : Object.keys(f.json.model.vocab).length;
  const lines = [];
  for (let i = 0; i < 300; i++) lines.push(line(f.specials));
  lines.push("", " ", "  leading and trailing  ", "\n\n", "a\u0301 e\u0301 (NFD accents)", "ﬁ ligature ① ｆｕｌｌ", "tab\tand\u000bvertical");
  lines.push(Array.from({ length: 80 }, () => line(f.specials)).join(" "));  // a long one: SentencePiece's BPE merges it as one word
  const out = lines.map((text) => {
    const plain = tok.encode(text, { add_special_tokens: false }).ids, special = tok.encode(text, { add_special_tokens: true }).ids;
    const decode = (ids, skip) => (ids.length ? tok.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }) : "");
    // Random ids too: byte tokens in any order decode to invalid UTF-8, replaced by U+FFFD. Not where
    // a ByteFallback decoder meets invalid bytes: the JavaScript port replaces each invalid
    // sequence, Hugging Face's Rust library (and ctgrad) each byte of the run (tests/data/test_hf_tokenizer.cpp).
    const random = Array.from({ length: 1 + Math.floor(rand() * 12) }, () => Math.floor(rand() * f.modelSize));
    const record = { text, ids: plain, special_ids: special, decoded: decode(plain, false), skipped: decode(special, true) };
    if (!JSON.stringify(f.json.decoder).includes("ByteFallback")) (record.random_ids = random), (record.random_decoded = decode(random, false));
    return JSON.stringify(record);
  });
  fs.writeFileSync(path.join(dir, "expected.jsonl"), out.join("\n") + "\n");
  try {
    process.stdout.write(execFileSync(checker, [path.join(dir, "tokenizer.json"), path.join(dir, "expected.jsonl")], { encoding: "utf8" }));
  } catch (e) {
    process.stdout.write((e.stdout || "") + (e.stderr || ""));
    failed++;
  }
}
// --- the Precompiled normalizer: SentencePiece itself as the oracle -----------------------------
// The JavaScript port approximates Precompiled by NFKC, so the oracle here is spm_normalize: a
// model's nmt_nfkc rules (trained without whitespace handling or a dummy prefix, so that the rules
// are all it applies), their compiled form read from the model file as transformers' converter
// reads it, and ctgrad's normalization of each line compared with SentencePiece's.
{
  const prefix = path.join(work, "spm-nfkc");
  execFileSync("spm_train", [`--input=${path.join(work, "corpus.txt")}`, `--model_prefix=${prefix}`, "--vocab_size=300", "--model_type=unigram",
                             "--character_coverage=1.0", "--minloglevel=2", "--num_threads=1", "--random_seed=1", "--normalization_rule_name=nmt_nfkc",
                             "--remove_extra_whitespaces=false", "--add_dummy_prefix=false"], { stdio: "ignore" });
  // ModelProto field 3 (normalizer_spec), its field 2 (precompiled_charsmap): protobuf's wire format.
  const field = (buf, want) => {
    for (let at = 0; at < buf.length;) {
      const varint = () => { let v = 0, shift = 0, b; do { b = buf[at++]; v += (b & 0x7f) * 2 ** shift; shift += 7; } while (b & 0x80); return v; };
      const key = varint(), number = Math.floor(key / 8), wire = key % 8;
      if (wire === 0) varint();
      else if (wire === 1) at += 8;
      else if (wire === 5) at += 4;
      else if (wire === 2) { const n = varint(); if (number === want) return buf.subarray(at, at + n); at += n; }
      else throw new Error("spm model: wire type " + wire);
    }
    return null;
  };
  const charsmap = field(field(fs.readFileSync(prefix + ".model"), 3), 2);
  const dir = path.join(work, "precompiled");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify({
    version: "1.0", truncation: null, padding: null, added_tokens: [], normalizer: { type: "Precompiled", precompiled_charsmap: Buffer.from(charsmap).toString("base64") },
    pre_tokenizer: null, post_processor: null, decoder: null, model: { type: "WordLevel", vocab: { "<unk>": 0 }, unk_token: "<unk>" } }));
  const lines = [];
  for (let i = 0; i < 300; i++) lines.push(line([]));
  lines.push("ﬁ ligature ① ｆｕｌｌ ㍻ Ⅻ ½ ™ ｶﾀｶﾅ", "a\u0301 e\u0301 o\u0308 (NFD accents)", "tab\tand\u000bvertical\u00a0nbsp\u3000ideographic", "\u200b\u200dzero widths\ufeff");
  const one = lines.map((l) => l.replace(/[\r\n]/g, " "));  // spm_normalize reads lines
  fs.writeFileSync(path.join(dir, "input.txt"), one.join("\n") + "\n");
  const want = execFileSync("spm_normalize", [`--model=${prefix}.model`, "--remove_extra_whitespaces=false", `--input=${path.join(dir, "input.txt")}`],
                            { encoding: "utf8", maxBuffer: 1 << 26 }).split("\n");
  fs.writeFileSync(path.join(dir, "expected.jsonl"), one.map((text, i) => JSON.stringify({ text, normalized: want[i] })).join("\n") + "\n");
  try {
    process.stdout.write(execFileSync(checker, ["--normalize", path.join(dir, "tokenizer.json"), path.join(dir, "expected.jsonl")], { encoding: "utf8" }));
  } catch (e) {
    process.stdout.write((e.stdout || "") + (e.stderr || ""));
    failed++;
  }
}
console.log(failed ? `${failed} of ${Object.keys(fixtures).length + 1} checks disagree with their oracle`
                   : `all ${Object.keys(fixtures).length} tokenizers agree with @huggingface/tokenizers, and Precompiled with spm_normalize`);
process.exit(failed ? 1 : 0);

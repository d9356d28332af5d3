#!/usr/bin/env bash
# fuzz/seeds.sh OUT BIN - make the seed corpora of the fuzz targets under OUT
# (one directory per target) with the dsv4q binary BIN: a capture of tiny
# (synth + capture, 3 tokens, 1 layer, f32), the published configs, the
# default gates, a receipts database and its JSON export, small token files,
# a one-tensor index, and small safetensors files (goldens payloads are zlib:
# the captures stand for the format).
set -eu
out=$1; bin=${2:-build/dsv4q}
mkdir -p "$out"/{safetensors,index,capture,config,gates,tokens,receipt_json,receipts_db,gguf}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bin" synth --config tiny --seed 1 --out "$tmp/tiny" >/dev/null
"$bin" capture --model "$tmp/tiny" --prompt-len 2 --decode 1 --layers 0:1 --dtype f32 --out "$tmp/cap" >/dev/null
for f in "$tmp"/cap/*.safetensors; do
  cp "$f" "$out/capture/$(basename "$f")"
  cp "$f" "$out/safetensors/$(basename "$f")"
done
cp tests/data/configs/*.json "$out/config/" 2>/dev/null || true
cp "$tmp/tiny/config.json" "$out/config/tiny.json"
cp gates/default.json "$out/gates/"
printf '{"prompt": [1, 2, 3], "teacher": [4]}' > "$out/tokens/a.json"
printf '{"prompt": [0]}' > "$out/tokens/b.json"
printf '{"weight_map": {"x": "a.safetensors", "y": "a.safetensors"}, "metadata": {"total_size": 16}}' > "$out/index/a.json"
printf '{"weight_map": {"x": "a.safetensors"}}' > "$out/index/b.json"
# a receipts database with one sensitivity receipt, and its export
export DSV4Q_DB="$tmp/r.db"
"$bin" sensitivity --model "$tmp/tiny" --prompt-len 2 --decode 0 >/dev/null 2>&1 || true
if [ -f "$tmp/r.db" ]; then
  sqlite3 "$tmp/r.db" 'PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;' >/dev/null 2>&1 || true
  cp "$tmp/r.db" "$out/receipts_db/r.db"
  "$bin" receipts export 1 --out "$out/receipt_json/r1.json" >/dev/null 2>&1 || true
fi
# GGUF: the smallest valid image (magic, version 3, no tensors, no keys),
# one with a string key and a 4-element F32 tensor (written by hand, little
# endian, 32-byte aligned data), and, when gguf-py is there, one it wrote
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$out/gguf/empty.gguf"
{ printf 'GGUF\003\000\000\000\001\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000'
  printf '\024\000\000\000\000\000\000\000general.architecture\010\000\000\000'
  printf '\011\000\000\000\000\000\000\000deepseek4'
  printf '\001\000\000\000\000\000\000\000t\001\000\000\000\004\000\000\000\000\000\000\000'
  printf '\000\000\000\000\000\000\000\000\000\000\000\000'
  head -c $(( (32 - 106 % 32) % 32 )) /dev/zero   # header 24 + key 49 + tensor info 33 = 106
  printf '\000\000\200\077\000\000\000\100\000\000\100\100\000\000\200\100'; } > "$out/gguf/one.gguf"
${PYTHON:-python3} - "$out/gguf/pywritten.gguf" <<'PY' 2>/dev/null || true
import sys, numpy as np, gguf
w = gguf.GGUFWriter(sys.argv[1], "deepseek4")
w.add_uint32("deepseek4.block_count", 1)
w.add_array("deepseek4.swa_layers", [0, 1])
w.add_tensor("blk.0.attn_norm.weight", np.arange(8, dtype=np.float32))
w.add_tensor("token_embd.weight", np.ones((2, 32), dtype=np.float16))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
ls "$out"/* | head -50 >/dev/null
echo "seeds in $out: $(find "$out" -type f | wc -l) files"

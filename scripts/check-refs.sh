#!/bin/sh
# check-refs.sh - fail when a comment or a doc cites something the tree does
# not have. Headers are read first by a newcomer; a header that names a file
# that moved, a function that was renamed or an invariant that was
# renumbered teaches the wrong tree, and nothing else catches it (the
# compiler does not read comments).
#
# Three kinds of citation, in the comments of *.c *.h *.inc *.cu *.py *.sh
# and in the whole text of *.md (not build/, tests/data/, tests/backends/v1/
# (a frozen copy), goldens/data/):
#  (a) a repository path: TOP/file.ext, TOP/sub/file.ext or a folder
#      TOP/sub/, where TOP is a top-level entry of the tree (so DeepSeek's
#      inference/model.py or a URL is not one). {a,b} alternatives are
#      expanded; <name>, {name} and * are wildcards that must match some
#      file. A path also counts when it exists relative to the citing file's
#      folder or one above it (a doc in python/ may cite its own tests/), and
#      a built plugin (.so) when its source (.c) is there.
#  (b) a name that begins with the project prefix dsv4q and an underscore
#      (called or not): it must occur in the code (not a comment) of some
#      scanned file. A _f32/_f64 suffix may come from the width macro X(),
#      and a prefix pasted with ## covers every name it begins.
#  (c) an invariant id (K1, R14, S3, ...) of a family that some header or
#      source defines in its "Invariants:" / DESIGN NOTES block (a comment
#      line "ID. text", or "Invariant ID: text"): it must be defined by a
#      file that owns it for the citing file - the file itself, its
#      companion (same stem), a file it #includes (and that file's
#      companion), or a file of its own folder. A doc (*.md) may cite an id
#      that any file defines. Ids collide across rooms (S1 is
#      oracle/stages.h's, io/safetensors.h's, harness/capture/stagewise.h's):
#      the owner rule is what tells them apart.
# Prints FILE:LINE: what for each, and exits 1 if there is one (0 if none).
# CHECK_REFS_STRICT=0 reports without failing: `make test` passes it while
# rooms other than the ones swept still cite stale things; drop that
# override from the Makefile's test recipe once the tree is clean (the
# default here is fatal). Needs python3 and git (falls back to walking the
# tree without git). Runs in about a second.
cd "$(dirname "$0")/.." || exit 2
command -v python3 >/dev/null 2>&1 || { echo "check-refs: python3 not found" >&2; exit 2; }
exec python3 - "$@" <<'PYEOF'
import fnmatch, io, os, re, subprocess, sys, tokenize

EXTS = ('.c', '.h', '.inc', '.cu', '.py', '.sh', '.md')
SKIP = ('build/', 'tests/data/', 'tests/backends/v1/', 'goldens/data/')

def tree_files():
    try:
        out = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard'], capture_output=True,
                             text=True, check=True).stdout.split('\n')
        files = [f for f in out if f and os.path.isfile(f)]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, sub, names in os.walk('.'):
            sub[:] = [s for s in sub if s not in ('.git', 'build', '__pycache__')]
            files += [os.path.normpath(os.path.join(d, n)) for n in names]
    return sorted(set(files))

ALL = tree_files()
FILES = set(ALL)
DIRS = set()
for f in ALL:
    p = f
    while '/' in p:
        p = p.rsplit('/', 1)[0]
        DIRS.add(p)
SCAN = [f for f in ALL if f.endswith(EXTS) and not f.startswith(SKIP)]

# ---- splitting a file into comment text and code text ----------------------

def split_c(text):
    """(comments, code): lists of (line, text) pieces of a C-like source."""
    com, code = [], []
    i, n, line = 0, len(text), 1
    buf, start, mode = [], 1, 'code'
    def flush(dst):
        if buf:
            dst.append((start, ''.join(buf)))
            buf.clear()
    while i < n:
        c = text[i]
        if mode == 'code':
            if text.startswith('/*', i):
                flush(code); mode, start = 'block', line; i += 2; continue
            if text.startswith('//', i):
                flush(code); mode, start = 'line', line; i += 2; continue
            if c in '"\'':
                q = c; buf.append(c); i += 1
                while i < n and text[i] != q and text[i] != '\n':
                    if text[i] == '\\' and i + 1 < n:
                        buf.append(text[i:i + 2]); i += 2; continue
                    buf.append(text[i]); i += 1
                if i < n and text[i] == q:
                    buf.append(q); i += 1
                continue
            if not buf:
                start = line
            buf.append(c)
        elif mode == 'block':
            if text.startswith('*/', i):
                flush(com); mode = 'code'; start = line; i += 2; continue
            buf.append(c)
        else:   # line comment
            if c == '\n':
                flush(com); mode = 'code'; start = line + 1
            else:
                buf.append(c)
        if c == '\n':
            line += 1
            if mode == 'block' and not buf:
                start = line
        i += 1
    flush(com if mode != 'code' else code)
    return com, code

def split_py(text):
    com, code = [], []
    try:
        prev = tokenize.NEWLINE
        for t in tokenize.generate_tokens(io.StringIO(text).readline):
            if t.type == tokenize.COMMENT:
                com.append((t.start[0], t.string))
            elif t.type == tokenize.STRING and prev in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                                         tokenize.NL):
                com.append((t.start[0], t.string))   # a docstring
            elif t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                code.append((t.start[0], t.string))
            if t.type not in (tokenize.NL, tokenize.COMMENT):
                prev = t.type
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return split_sh(text)
    return com, code

def split_sh(text):
    com, code = [], []
    for ln, s in enumerate(text.split('\n'), 1):
        q, k = None, -1
        for j, ch in enumerate(s):
            if q:
                if ch == q: q = None
            elif ch in '"\'':
                q = ch
            elif ch == '#' and (j == 0 or s[j - 1] in ' \t;'):
                k = j
                break
        if k >= 0:
            com.append((ln, s[k:]))
            code.append((ln, s[:k]))
        else:
            code.append((ln, s))
    return com, code

def split(path, text):
    if path.endswith('.md'):
        return [(1, text)], []
    if path.endswith('.py'):
        return split_py(text)
    if path.endswith('.sh'):
        return split_sh(text)
    return split_c(text)

def lines_of(pieces):
    """(line, text) per physical line."""
    for start, s in pieces:
        for k, t in enumerate(s.split('\n')):
            yield start + k, t

# ---- the tree's definitions ---------------------------------------------------

TEXT, COM, CODE = {}, {}, {}
for f in SCAN:
    try:
        with open(f, encoding='utf-8', errors='replace') as fh:
            TEXT[f] = fh.read()
    except OSError:
        continue
    COM[f], CODE[f] = split(f, TEXT[f])

NAME = re.compile(r'\bdsv4q_[A-Za-z0-9_]*')
defined, pasted = set(), set()
for f, pieces in CODE.items():
    for _, s in pieces:
        for m in NAME.finditer(s):
            defined.add(m.group(0))
            if s[m.end():m.end() + 8].lstrip().startswith('##'):
                pasted.add(m.group(0))

DEF_LINE = re.compile(r'^\s*(?:\*|//|#)?\s*(?:([A-Z])([0-9]{1,2})\.|Invariant\s+([A-Z])([0-9]{1,2}):)\s')
owners = {}   # id -> set of files that define it
for f, pieces in COM.items():
    if f.endswith('.md'):
        continue
    for ln, s in lines_of(pieces):
        m = DEF_LINE.match(s)
        if m:
            owners.setdefault((m.group(1) or m.group(3)) + (m.group(2) or m.group(4)), set()).add(f)
FAMILIES = ''.join(sorted({k[0] for k in owners}))

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)

def companions(f):
    stem = f.rsplit('.', 1)[0]
    return {stem + e for e in ('.c', '.h', '.inc', '.cu')} & FILES

def owner_files(f):
    own = {f} | companions(f)
    for inc in INCLUDE.findall(TEXT.get(f, '')):
        for cand in (inc, os.path.normpath(os.path.join(os.path.dirname(f), inc))):
            if cand in FILES:
                own |= {cand} | companions(cand)
    d = os.path.dirname(f)
    own |= {g for g in FILES if os.path.dirname(g) == d}
    return own

# ---- the checks -------------------------------------------------------------

TOPS = sorted({f.split('/', 1)[0] for f in ALL if '/' in f} - {'build'}, key=len, reverse=True)
PATH_START = re.compile(r'(?<![\w./~{}<>*@:-])(?:\./)?(' + '|'.join(re.escape(t) for t in TOPS) + r')/')
PATH_CHARS = re.compile(r'[\w.*<>{}/+-]')

def path_token(s, i):
    """The path beginning at s[i] (braces may hold commas)."""
    depth, j = 0, i
    while j < len(s):
        ch = s[j]
        if ch == '{': depth += 1
        elif ch == '}':
            if not depth: break
            depth -= 1
        elif ch == ',' and depth: pass
        elif not PATH_CHARS.match(ch): break
        j += 1
    t = s[i:j]
    if t.endswith('...'):   # harness/X/... : a pattern in prose, not a path
        return ''
    while t and t[-1] in '.,>{*' and not t.endswith('/*'):
        t = t[:-1]
    return t

def expand(t):
    m = re.search(r'\{([^{}]*)\}', t)
    if not m:
        return [t]
    alts = m.group(1).split(',') if ',' in m.group(1) else ['*']
    return [x for a in alts for x in expand(t[:m.start()] + a + t[m.end():])]

def exists(p, base):
    p = re.sub(r'<[^<>/]*>', '*', p)
    folder = p.endswith('/')
    p = p.rstrip('/')
    if p.startswith('./'):
        p = p[2:]
    pool = DIRS if folder else FILES | DIRS
    if p.endswith('.so'):   # a plugin is built from its source
        p = p[:-3] + '.c'
    roots = ['']
    d = base
    while d:
        roots.append(d + '/')
        d = os.path.dirname(d)
    for r in roots:
        q = r + p
        if '*' in q or '?' in q:
            if any(fnmatch.fnmatchcase(x, q) for x in pool):
                return True
        elif q in pool:
            return True
    return False

def is_citable(t):
    if t.endswith('/'):
        return True
    last = t.rsplit('/', 1)[-1]
    if last.startswith('..') or last.endswith('.tmp'):   # a command's scratch file
        return False
    return re.search(r'\.[A-Za-z][A-Za-z0-9]*$', last) is not None

ID = re.compile(r'(?<![\w.-])([' + FAMILIES + r'])([0-9]{1,2})(?![\w])') if FAMILIES else None
# names that look like ids but are not: dtypes, C standards
NOT_IDS = {'F8', 'F16', 'F32', 'F64', 'I8', 'I16', 'I32', 'I64',
           'C89', 'C90', 'C99', 'C11', 'C17', 'C23'}
RANGE = re.compile(r'\b([A-Z])([0-9]{1,2})\s*(?:\.\.|-|–)\s*([A-Z])?([0-9]{1,2})\b')

found = []
for f in SCAN:
    pieces = COM.get(f)
    if pieces is None:
        continue
    own = owner_files(f) if not f.endswith('.md') else None
    base = os.path.dirname(f)
    for ln, s in lines_of(pieces):
        for m in PATH_START.finditer(s):
            t = path_token(s, m.start())
            if not t or not is_citable(t):
                continue
            for p in expand(t):
                if not exists(p, base):
                    found.append((f, ln, 'path %s does not exist' % t))
                    break
        for m in NAME.finditer(s):
            n = m.group(0)
            if n.endswith('_') or s[m.end():m.end() + 1] in ('*', '<'):
                continue
            stem = re.sub(r'_f(32|64)$', '', n)
            if n in defined or stem in defined or any(n.startswith(p) for p in pasted):
                continue
            found.append((f, ln, '%s is not defined anywhere in the tree' % n))
        if not ID:
            continue
        ids = [(m.group(1), int(m.group(2))) for m in ID.finditer(s)]
        for m in RANGE.finditer(s):   # R1..R14: both ends
            if m.group(1) in FAMILIES and (m.group(3) in (None, m.group(1))):
                ids.append((m.group(1), int(m.group(4))))
        seen = set()
        for fam, k in ids:
            i = '%s%d' % (fam, k)
            if i in seen or i in NOT_IDS or k == 0:
                continue
            seen.add(i)
            where = owners.get(i, set())
            if own is None:
                ok = bool(where) or not any(x.startswith(fam) for x in owners)
            else:
                fam_here = any(o for x, o in owners.items() if x[0] == fam and o & own)
                ok = bool(where & own) or not fam_here
            if not ok:
                by = sorted({o for x, o_ in owners.items() if x[0] == fam for o in o_ & (own or FILES)})
                found.append((f, ln, 'invariant %s is not defined by %s' % (i, ', '.join(by) or 'any file')))

for f, ln, what in sorted(set(found), key=lambda x: (x[0], x[1], x[2])):
    print('%s:%d: %s' % (f, ln, what))
sys.stdout.flush()
strict = os.environ.get('CHECK_REFS_STRICT', '1') != '0'
if found:
    print('check-refs: %d stale citation(s)%s' % (len(set(found)), '' if strict else ' (report only: CHECK_REFS_STRICT=0)'),
          file=sys.stderr)
    sys.exit(1 if strict else 0)
print('check-refs: ok (%d files)' % len(SCAN))
PYEOF

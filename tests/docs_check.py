#!/usr/bin/env python3
"""Checks the documentation against the tree and the binaries.

    tests/docs_check.py ROOT NAME=PATH [NAME=PATH ...]

e.g.

    tests/docs_check.py . ps_server=bazel-bin/server/ps_server \\
        ps_worker=bazel-bin/worker/ps_worker ps_admin=bazel-bin/tools/ps_admin \\
        ps_ckpt=bazel-bin/tools/ps_ckpt

In README.md and every docs/**/*.md under ROOT:

1. Links. Every relative link, inline (`[text](path#anchor)`, `![alt](path)`)
   or a reference definition (`[label]: path`), outside code, must name an
   existing file or directory, relative to the file it is in (or to ROOT when
   it starts with '/'). An anchor must match a heading of the target
   Markdown file (or of the file itself, for `#anchor` alone), by GitHub's
   rules: the heading's text, lower-cased, without punctuation other than
   '-' and '_', each space a '-'; a repeated heading gets -1, -2, ...
   Links with a scheme (https:, mailto:) are not checked.

2. Flags. A line (in a fenced code block, a line continued with '\\' is
   joined with the next) that names one of the binaries given on the command
   line is checked: every `--flag` on it must be one of that binary's flags,
   as `NAME --helpfull` prints them (absl: `    --flag (description)`;
   `--noflag` is accepted for any flag, as absl does for booleans). When a
   line names several binaries, the flag must be a flag of at least one of
   them. Which command a flag belongs to is decided by the nearest command
   named before it on the line:
     - a binary, nothing, or a separator (`|`, `;`, `&`): the binaries named
       on the line, as above;
     - a script (`deploy/local_cluster.sh`, any `*.sh` of the tree): the
       script's own flags, read from `SCRIPT --help` when the script handles
       --help (its source has a `--help)` case); a script without --help
       (deploy/setup.sh, deploy/test.sh, deploy/fuzz.sh, ...) cannot say
       which flags it takes, so flags after it are not checked;
       (deploy/bench.sh also takes deploy/bench_compare.sh's flags, which it
       passes on with --baseline);
     - a standalone `--` after deploy/local_cluster.sh or
       deploy/sparse_experiment.sh: the flags after it are passed to
       ps_worker and are checked against ps_worker (when given);
     - any other command (bazel, etcd, docker, mpirun, srun, ps_gen_libsvm, ...,
       or a Bazel label such as //server:ps_server): not checked.

Prints each failure as `file:line: message` naming the link or the flag and
the binary, then a summary. Exits 1 on any failure, 0 otherwise, 2 on bad
usage or a binary that cannot print its flags. Python 3 standard library
only.
"""

import os
import re
import subprocess
import sys
import urllib.parse

# Scripts whose arguments after a standalone `--` go to ps_worker.
PASSTHROUGH_TO = {
    "deploy/local_cluster.sh": "ps_worker",
    "deploy/sparse_experiment.sh": "ps_worker",
}
# Scripts that hand their arguments to another script: deploy/bench.sh
# --baseline REV execs deploy/bench_compare.sh with all of them, so a flag
# after deploy/bench.sh may be either script's.
SCRIPT_FORWARDS = {
    "deploy/bench.sh": "deploy/bench_compare.sh",
}
# Commands whose flags are not ours to check.
OTHER_COMMANDS = [
    "bazel", "bazelisk", "etcd", "etcdctl", "docker", "docker-compose", "kubectl", "sbatch",
    "scancel", "squeue", "srun", "openssl", "pip", "python", "python3", "iperf3", "perf",
    "grpcurl", "grpc_cli", "ip", "git", "npm", "node", "yamllint", "apt-get", "dd", "gnuplot",
    "mpirun", "mpiexec",
    "ps_bench", "ps_gen_libsvm", "store_bench", "optimizer_bench", "train_bench",
    "exact_sum_client", "soak_client", "torch_mnist.py", "torch_embedding.py",
    "py_pushpull.py", "cpp_pushpull", "valgrind", "callgrind",
]
ABSL_BUILTIN_FLAGS = {"help", "helpfull", "helpshort", "helppackage", "helpon", "helpmatch",
                      "version", "only_check_args", "flagfile", "fromenv", "tryfromenv",
                      "undefok"}

FLAG_RE = re.compile(r"(?<![\w\-/.=:])--([A-Za-z][A-Za-z0-9_\-]*)")
DASHDASH_RE = re.compile(r"(?<![\w\-])--(?![\w\-])")
SEPARATOR_RE = re.compile(r"\|\||&&|[|;&]")
SCRIPT_RE = re.compile(r"(?:(?<=^)|(?<=[\s`(\[\"'=]))((?:\./)?[\w./\-]*[\w\-]\.sh)(?![\w\-])")
FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
INLINE_LINK_RE = re.compile(
    r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF_RE = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
ANCHOR_TAG_RE = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def command_regex(word):
    # A command word: at the start, after a space, a quote, a bracket, '/',
    # or a shell separator; not followed by a word character or '-'.
    return re.compile(r"(?:(?<=^)|(?<=[\s`(\[/|;&\"']))" + re.escape(word) + r"(?![\w\-])")


def github_slug(text):
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)  # images: alt text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w: letters, digits, '_' (Unicode)
    return text.replace(" ", "-")


class MarkdownFile:
    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8") as f:
            self.lines = f.read().split("\n")
        self.fenced = []  # per line: inside a fenced code block (fence lines included)
        fence = None
        for line in self.lines:
            m = FENCE_RE.match(line)
            if fence is None and m:
                fence = m.group(1)
                self.fenced.append(True)
            elif fence is not None:
                self.fenced.append(True)
                if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                        and line.strip() == m.group(1):
                    fence = None
            else:
                self.fenced.append(False)
        self._anchors = None

    def anchors(self):
        if self._anchors is None:
            self._anchors = set()
            counts = {}
            for i, line in enumerate(self.lines):
                if self.fenced[i]:
                    continue
                m = HEADING_RE.match(line)
                if m:
                    slug = github_slug(m.group(2))
                    n = counts.get(slug, 0)
                    counts[slug] = n + 1
                    self._anchors.add(slug if n == 0 else "%s-%d" % (slug, n))
                for a in ANCHOR_TAG_RE.findall(line):
                    self._anchors.add(a)
        return self._anchors


class Checker:
    def __init__(self, root, binaries):
        self.root = os.path.abspath(root)
        self.binaries = binaries  # name -> set of flags
        self.failures = []
        self.links = 0
        self.anchors = 0
        self.flags = 0
        self.unchecked_flags = 0
        self.files = {}
        self.script_flags = {}  # script path -> set of flags, or None (no --help)
        self.binary_res = {name: command_regex(name) for name in binaries}
        self.other_res = [command_regex(w) for w in OTHER_COMMANDS if w not in binaries]

    def fail(self, path, line, message):
        self.failures.append("%s:%d: %s" % (os.path.relpath(path, self.root), line, message))

    def markdown(self, path):
        path = os.path.normpath(path)
        if path not in self.files:
            self.files[path] = MarkdownFile(path)
        return self.files[path]

    # ---- links ----

    def check_links(self, md):
        for i, line in enumerate(md.lines):
            if md.fenced[i]:
                continue
            text = CODE_SPAN_RE.sub("CODE", line)
            targets = [m.group(3) for m in INLINE_LINK_RE.finditer(text)]
            m = REF_DEF_RE.match(text)
            if m:
                targets.append(m.group(2))
            for target in targets:
                self.check_link(md, i + 1, target)

    def check_link(self, md, lineno, target):
        if not target or re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*:", target) or target.startswith("//"):
            return  # a URL: not checked
        self.links += 1
        path_part, _, anchor = target.partition("#")
        path_part = urllib.parse.unquote(path_part)
        if path_part == "":
            dest = md.path
        elif path_part.startswith("/"):
            dest = os.path.join(self.root, path_part.lstrip("/"))
        else:
            dest = os.path.join(os.path.dirname(md.path), path_part)
        dest = os.path.normpath(dest)
        if not os.path.exists(dest):
            self.fail(md.path, lineno, "link '%s': %s does not exist"
                      % (target, os.path.relpath(dest, self.root)))
            return
        if not os.path.realpath(dest).startswith(self.root + os.sep) and \
                os.path.realpath(dest) != self.root:
            self.fail(md.path, lineno, "link '%s' leaves the repository" % target)
            return
        if not anchor:
            return
        self.anchors += 1
        if os.path.isdir(dest):
            self.fail(md.path, lineno, "link '%s': anchor '#%s' on a directory" % (target, anchor))
        elif dest.endswith(".md"):
            if urllib.parse.unquote(anchor) not in self.markdown(dest).anchors():
                self.fail(md.path, lineno, "link '%s': no heading of %s has the anchor '#%s'"
                          % (target, os.path.relpath(dest, self.root), anchor))
        elif not re.match(r"^L\d+(-L\d+)?$", anchor):
            self.fail(md.path, lineno, "link '%s': anchor '#%s' into a file that is not Markdown"
                      % (target, anchor))

    # ---- flags ----

    def script_path(self, token):
        token = token[2:] if token.startswith("./") else token
        if os.path.isfile(os.path.join(self.root, token)):
            return token
        base = os.path.basename(token)
        found = []
        for top in ("deploy", "python", "tests", "tools"):
            for dirpath, dirnames, filenames in os.walk(os.path.join(self.root, top)):
                dirnames[:] = [d for d in dirnames if not d.startswith((".", "bazel-"))]
                if base in filenames:
                    found.append(os.path.relpath(os.path.join(dirpath, base), self.root))
        return found[0] if len(found) == 1 else None

    def flags_of_script(self, script):
        if script not in self.script_flags:
            full = os.path.join(self.root, script)
            with open(full, encoding="utf-8", errors="replace") as f:
                source = f.read()
            if not re.search(r"(^|[\s|(])--help\s*[)|]", source, re.M):
                self.script_flags[script] = None  # no --help: its flags are unknown
            else:
                try:
                    out = subprocess.run(["bash", full, "--help"], cwd=self.root,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, timeout=60).stdout
                except subprocess.TimeoutExpired:
                    out = b""
                text = out.decode("utf-8", "replace")
                flags = set(m.group(1) for m in FLAG_RE.finditer(text))
                flags |= {"help"}
                forward = SCRIPT_FORWARDS.get(script)
                if forward:
                    flags |= self.flags_of_script(forward) or set()
                self.script_flags[script] = flags
        return self.script_flags[script]

    def has_flag(self, flags, name):
        return name in flags or (name.startswith("no") and name[2:] in flags)

    def logical_lines(self, md):
        """(first line number, text) of each line; code lines ending in '\\' joined."""
        i = 0
        while i < len(md.lines):
            start, text = i, md.lines[i]
            while md.fenced[i] and text.endswith("\\") and i + 1 < len(md.lines) \
                    and md.fenced[i + 1]:
                i += 1
                text = text[:-1] + " " + md.lines[i]
            yield start + 1, text
            i += 1

    def check_flags(self, md):
        for lineno, text in self.logical_lines(md):
            events = []  # (position, kind, value)
            named = set()
            for name, rx in self.binary_res.items():
                for m in rx.finditer(text):
                    if m.start() > 0 and text[m.start() - 1] == ":" or \
                            re.search(r"//[\w/]*:$", text[:m.start()]):
                        events.append((m.start(), "other", name))  # a Bazel label
                    else:
                        events.append((m.start(), "binary", name))
                        named.add(name)
            spans = []  # script paths: no other command is read inside one
            for m in SCRIPT_RE.finditer(text):
                script = self.script_path(m.group(1))
                events.append((m.start(), "script" if script else "other", script or m.group(1)))
                spans.append((m.start(), m.end()))
            events = [e for e in events
                      if e[1] == "script" or not any(a <= e[0] < b for a, b in spans)]
            for rx in self.other_res:
                for m in rx.finditer(text):
                    if not any(a <= m.start() < b for a, b in spans):
                        events.append((m.start(), "other", m.group(0)))
            for m in SEPARATOR_RE.finditer(text):
                events.append((m.start(), "separator", m.group(0)))
            for m in DASHDASH_RE.finditer(text):
                events.append((m.start(), "dashdash", "--"))
            events.sort(key=lambda e: e[0])
            for m in FLAG_RE.finditer(text):
                name = m.group(1)
                owner = None  # the nearest event before the flag
                passthrough_of = None
                for pos, kind, value in events:
                    if pos >= m.start():
                        break
                    if kind == "dashdash":
                        if owner and owner[0] == "script" and passthrough_of is None:
                            passthrough_of = owner[1]
                        owner = ("dashdash", passthrough_of)
                        continue
                    owner = (kind, value)
                    passthrough_of = None
                self.check_flag(md, lineno, name, owner, named)

    def check_flag(self, md, lineno, name, owner, named):
        kind, value = owner if owner else (None, None)
        if kind == "other":
            return
        if kind == "script":
            flags = self.flags_of_script(value)
            if flags is None:
                self.unchecked_flags += 1
                return
            self.flags += 1
            if not self.has_flag(flags, name):
                self.fail(md.path, lineno, "--%s is not a flag of %s (see %s --help)"
                          % (name, value, value))
            return
        if kind == "dashdash":
            target = PASSTHROUGH_TO.get(value) if value else None
            if target is None or target not in self.binaries:
                self.unchecked_flags += 1
                return
            self.flags += 1
            if not self.has_flag(self.binaries[target], name):
                self.fail(md.path, lineno, "--%s (after %s --) is not a flag of %s"
                          % (name, value, target))
            return
        if not named:
            return  # the line names no binary: not a flag we can attribute
        self.flags += 1
        if not any(self.has_flag(self.binaries[b], name) for b in named):
            self.fail(md.path, lineno, "--%s is not a flag of %s" % (name, " or ".join(sorted(named))))

    def run(self):
        paths = [os.path.join(self.root, "README.md")]
        for dirpath, dirnames, filenames in os.walk(os.path.join(self.root, "docs")):
            dirnames.sort()
            paths += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".md")]
        for path in paths:
            if not os.path.isfile(path):
                self.fail(path, 0, "missing")
                continue
            md = self.markdown(path)
            self.check_links(md)
            self.check_flags(md)
        return paths


def binary_flags(name, path):
    try:
        out = subprocess.run([path, "--helpfull"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SystemExit("docs_check: %s=%s: cannot run --helpfull: %s" % (name, path, e))
    flags = set(re.findall(r"^    --([A-Za-z0-9_]+) \(", out.decode("utf-8", "replace"), re.M))
    if not flags:
        raise SystemExit("docs_check: %s=%s --helpfull printed no flags" % (name, path))
    return flags | ABSL_BUILTIN_FLAGS


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    root = argv[1]
    binaries = {}
    for arg in argv[2:]:
        name, sep, path = arg.partition("=")
        if not sep or not name or not path:
            print("docs_check: expected NAME=PATH, got '%s'" % arg, file=sys.stderr)
            return 2
        if not os.path.isabs(path):
            path = os.path.join(root, path)
        binaries[name] = binary_flags(name, path)
    checker = Checker(root, binaries)
    paths = checker.run()
    for failure in checker.failures:
        print(failure)
    scripts = sorted(s for s, f in checker.script_flags.items() if f is not None)
    print("docs_check: %d files; %d links checked (%d with anchors); %d flags checked against %s "
          "and %d scripts' --help (%d flags after scripts without --help not checked); %d failures"
          % (len(paths), checker.links, checker.anchors, checker.flags,
             ", ".join(sorted(binaries)) or "no binaries", len(scripts), checker.unchecked_flags,
             len(checker.failures)))
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

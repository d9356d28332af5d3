#!/usr/bin/env python3
"""Run the command lines of the CI examples (examples/ci/*.yml) as a CI
runner would, on the synthesized tiny checkpoint.

usage: ci_examples.py REPO WORKDIR [BACKEND]

Reads each file with PyYAML, takes the GitHub steps' `run:` lines and the
GitLab job's `script:` / `after_script:` items, and runs each with bash in
WORKDIR (which holds links to the repo's top-level entries, so `./build/dsv4q`
and `examples/ci/...` resolve) with the file's env/variables, BACKEND
overridden when given. Set-up lines (apt-get, deps.sh, make, git worktree:
the test environment has done them) are listed and skipped; the previous
commit's report is stood in for by a copy of this run's (the comparison
then runs for real and must find no regression). A line identical (with the
same env) to one of the first file runs once. Exit 0 when every line
exits 0, else 1 naming the file, the line and its exit code."""
import os
import shutil
import subprocess
import sys

import yaml

SETUP = ("apt-get", "sh scripts/deps.sh", "make", "git worktree")


def lines_of(path, doc):
    if "jobs" in doc:   # GitHub Actions
        for job in doc["jobs"].values():
            env = dict(job.get("env") or {})
            for step in job.get("steps", []):
                if "run" in step:
                    yield env, step["run"]
    else:               # GitLab CI
        for name, job in doc.items():
            if not isinstance(job, dict) or "script" not in job:
                continue
            env = dict(job.get("variables") or {})
            for key in ("script", "after_script"):
                for line in job.get(key, []):
                    yield env, line


def main():
    repo, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    backend = sys.argv[3] if len(sys.argv) > 3 else None
    ran = 0
    done = {}
    for name in ("github-actions.yml", "gitlab-ci.yml"):
        path = os.path.join(repo, "examples", "ci", name)
        with open(path) as f:
            doc = yaml.safe_load(f)
        wd = work   # one scratch directory: both files see each other's ci/
        os.makedirs(os.path.join(wd, "ci"), exist_ok=True)
        for entry in os.listdir(repo):
            if entry not in (".git", "ci") and not os.path.exists(os.path.join(wd, entry)):
                os.symlink(os.path.join(repo, entry), os.path.join(wd, entry))
        for env, line in lines_of(path, doc):
            line = line.strip()
            if line.startswith(SETUP):
                print(f"{name}: set-up, skipped here: {line}")
                continue
            if "prev-qualify.json" in line and os.path.exists(os.path.join(wd, "ci", "qualify.json")):
                shutil.copy(os.path.join(wd, "ci", "qualify.json"), os.path.join(wd, "ci", "prev-qualify.json"))
            key = (line, tuple(sorted((k, v) for k, v in env.items() if k == "BACKEND" or k.startswith("DSV4Q_"))))
            if key in done:   # the same line with the same env already ran for the other file
                print(f"{name}: same as {done[key]}, ran there: {line}")
                continue
            done[key] = name
            e = dict(os.environ)
            e.update({k: str(v) for k, v in env.items()})
            if backend:
                e["BACKEND"] = backend
            print(f"{name}: $ {line}", flush=True)
            rc = subprocess.run(["bash", "-c", line], cwd=wd, env=e).returncode
            ran += 1
            if rc != 0:
                print(f"{name}: exit {rc}: {line}")
                return 1
    print(f"ci_examples: {ran} command lines ran, all exit 0")
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())

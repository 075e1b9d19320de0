"""Accuracy of ``autograd-lint check`` on real repositories, judged by hand.

Usage:
  python bench/accuracy.py run [--tool PATH] [--out FILE] [--only NAME ...] [--count-functions] [--selection all|default]
  python bench/accuracy.py table RESULTS [--judgements CSV]
  python bench/accuracy.py unjudged RESULTS [--judgements CSV] [--before EARLIER_RESULTS]
  python bench/accuracy.py repos RESULTS
  python bench/accuracy.py compare BEFORE AFTER

``run`` extracts every repository of bench/accuracy_repos.txt at its pinned
commit into --realcode (default /work/realcode/<name>, from the bare git dirs
the ``fetch`` tool leaves under --mirrors, default /work/.mirror), runs the
given ``autograd-lint`` over each with no configuration file, writes all
diagnostics to --out as JSON and prints per-rule counts.  ``--selection all``
(the default) runs ``--select ALL``: every rule, off-by-default ones included (the compile
family AGL150-AGL154, AGL028, AGL030, AGL032, AGL033, AGL100): what the rules can find.
(A tool older than issue 23 read ``ALL`` as "every default rule"; its ``all`` runs missed the
off-by-default ones.)  ``--selection
default`` selects nothing: what a new user gets from a plain ``autograd-lint check``.

``table`` merges a results file with the judgements (bench/accuracy_judgements.csv:
repo, path, line, code, verdict, note, message_contains; verdict is ``true`` = worth acting on,
``deliberate`` = true by the rule's wording but intended or harmless, ``false`` =
the code is correct and the rule misread it) and prints the Markdown per-rule
table of docs/accuracy.md, then what each false diagnostic taught. A judgement
is keyed by (repo, path, line, code), so it survives re-runs of the same pins;
where a new version of a rule reports the same place for another reason, a row
whose ``message_contains`` matches the new message judges it instead.

``unjudged`` lists the diagnostics of a results file that have no judgement yet;
``repos`` prints the pinned repositories with their Function and diagnostic counts;
``compare`` prints the per-rule before/after table.
Third-party code is only ever extracted outside this repository.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPOS_FILE = BENCH / "accuracy_repos.txt"
JUDGEMENTS_FILE = BENCH / "accuracy_judgements.csv"
VERDICTS = ("true", "deliberate", "false")


@dataclass(frozen=True)
class PinnedRepo:
    name: str
    slug: str
    commit: str


Key = tuple[str, str, int, str]


def pinned_repos() -> list[PinnedRepo]:
    repos = []
    for line in REPOS_FILE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, slug, commit = line.split()
            repos.append(PinnedRepo(name, slug, commit))
    return repos


def installed_tree(repo: PinnedRepo) -> Path:
    """An installed package (``installed:torch``, pinned by version) linted in place."""
    package = repo.slug.removeprefix("installed:")
    script = f"import {package}, os; print({package}.__version__); print(os.path.dirname({package}.__file__))"
    version, location = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout.split()
    if version.split("+")[0] != repo.commit:
        sys.exit(f"{repo.name}: installed {package} is {version}, the bench pins {repo.commit}")
    return Path(location)


def extract(repo: PinnedRepo, mirrors: Path, realcode: Path) -> Path:
    """The repository's tree at its pinned commit, extracted once."""
    if repo.slug.startswith("installed:"):
        return installed_tree(repo)
    target = realcode / repo.name
    stamp = target / ".accuracy-commit"
    if stamp.exists() and stamp.read_text().strip() == repo.commit:
        return target
    git_dir = mirrors / repo.slug.replace("/", "+") / "repo"
    if not git_dir.is_dir():
        sys.exit(f"{git_dir}: no mirror; fetch github:{repo.slug} first")
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    archive = subprocess.run(
        # Python sources only (.py): the mirrors may lack large binary blobs.
        ["git", f"--git-dir={git_dir}", "archive", repo.commit, "--", ":(glob)**/*.py"],
        check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    stamp.write_text(repo.commit + "\n")
    return target


def count_functions(tool: Path, tree: Path) -> int:
    """How many autograd.Functions the tool discovers in ``tree`` (its own discovery, no import of the code)."""
    script = "import sys; from autograd_lint.model.discovery import discover_functions; print(len(discover_functions(sys.argv[1:])))"
    # -P: neither the working directory nor the tree may shadow the tool's package or the standard library.
    command = [str(tool.parent / "python"), "-P", "-c", script, str(tree)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return int(done.stdout)


def lint(tool: Path, tree: Path, every_rule: bool) -> dict:
    """``every_rule``: ``--select ALL`` (every rule, as in ruff); otherwise the default selection."""
    selection = ["--select", "ALL"] if every_rule else []
    command = [str(tool), "check", "--isolated", *selection, "--output-format", "json", "--exit-zero", "."]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{tree}: autograd-lint exited {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def run(args: argparse.Namespace) -> None:
    tool = Path(args.tool).absolute()
    diagnostics, errors = [], []
    functions: dict[str, int] = {}
    for repo in pinned_repos():
        if args.only and repo.name not in args.only:
            continue
        tree = extract(repo, args.mirrors, args.realcode)
        report = lint(tool, tree, args.selection == "all")
        for diagnostic in report["diagnostics"]:
            diagnostics.append({"repo": repo.name, **diagnostic, "path": diagnostic["path"].removeprefix("./")})
        errors.extend({"repo": repo.name, **error} for error in report.get("errors", []))
        line = f"{repo.name:28} {len(report['diagnostics']):4} diagnostics"
        if args.count_functions:
            functions[repo.name] = count_functions(tool, tree)
            line += f" {functions[repo.name]:5} Functions"
        print(line, file=sys.stderr)
    document = {
        "tool": str(tool), "selection": args.selection, "functions": functions,
        "diagnostics": diagnostics, "errors": errors,
    }
    Path(args.out).write_text(json.dumps(document, indent=1))
    for code, count in sorted(Counter(d["code"] for d in diagnostics).items()):
        print(f"{code} {count}")
    print(f"total {len(diagnostics)}; files not checked: {len(errors)}")
    if functions:
        print(f"Functions: {sum(functions.values())}")


def key_of(row: dict) -> Key:
    return (row["repo"], row["path"], int(row["line"]), row["code"])


def judgements(path: Path) -> dict[Key, list[dict]]:
    """Judgements by key; a row with ``message_contains`` applies only to messages holding that text."""
    if not path.exists():
        return {}
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    judged: dict[Key, list[dict]] = defaultdict(list)
    for row in rows:
        if row["verdict"] not in VERDICTS:
            sys.exit(f"{path}: {key_of(row)}: verdict {row['verdict']!r} is not one of {VERDICTS}")
        judged[key_of(row)].append(row)
    return judged


def judgement(judged: dict[Key, list[dict]], diagnostic: dict) -> dict | None:
    """The row judging ``diagnostic``: one whose ``message_contains`` matches first, else a general one."""
    rows = judged.get(key_of(diagnostic), [])
    specific = [row for row in rows if row.get("message_contains") and row["message_contains"] in diagnostic["message"]]
    general = [row for row in rows if not row.get("message_contains")]
    return (specific or general or [None])[0]


# Set by --default-rules: only the diagnostics of rules a plain `check` runs are counted.
_ONLY: set[str] | None = None


def default_rule_codes() -> set[str]:
    """The codes of the rules on by default (this interpreter's autograd_lint, no configuration)."""
    from autograd_lint.rules import all_rules

    return {rule.code for rule in all_rules() if rule.enabled_by_default}


def results(path: str) -> list[dict]:
    found = json.loads(Path(path).read_text())["diagnostics"]
    return found if _ONLY is None else [d for d in found if d["code"] in _ONLY]


def verdict_counts(path: str, judged: dict[Key, list[dict]]) -> tuple[dict[str, Counter], list[str]]:
    """Per rule, how many diagnostics got each verdict; and one line per false diagnostic."""
    counts: dict[str, Counter] = defaultdict(Counter)
    lessons: list[str] = []
    for diagnostic in results(path):
        row = judgement(judged, diagnostic)
        verdict = row["verdict"] if row else "unjudged"
        counts[diagnostic["code"]][verdict] += 1
        if row and verdict == "false":
            where = f"{diagnostic['repo']}/{diagnostic['path']}:{diagnostic['line']}"
            lessons.append(f"- {diagnostic['code']} `{where}`: {row['note']}")
    return counts, lessons


def table(args: argparse.Namespace) -> None:
    counts, lessons = verdict_counts(args.results, judgements(args.judgements))
    total: Counter = Counter()
    print("| Rule | Diagnostics | True | Deliberate / harmless | False | Unjudged |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for code, count in sorted(counts.items()):
        total.update(count)
        print(f"| {code} | {sum(count.values())} | {count['true']} | {count['deliberate']} | {count['false']} | {count['unjudged']} |")
    all_count = sum(total.values())
    print(f"| **all** | **{all_count}** | **{total['true']}** | **{total['deliberate']}** | **{total['false']}** | **{total['unjudged']}** |")
    if all_count:
        print(f"\nWorth acting on: {total['true'] / all_count:.0%}; false: {total['false'] / all_count:.0%}.")
    if lessons:
        print("\nFalse diagnostics and what each taught:\n")
        print("\n".join(lessons))


def compare(args: argparse.Namespace) -> None:
    """Per rule, before and after side by side: diagnostics / true / deliberate / false."""
    judged = judgements(args.judgements)
    before, _ = verdict_counts(args.before, judged)
    after, _ = verdict_counts(args.after, judged)

    def cell(count: Counter) -> str:
        return f"{sum(count.values())} / {count['true']} / {count['deliberate']} / {count['false']}"

    print("| Rule | Before: all / true / deliberate / false | After: all / true / deliberate / false |")
    print("| --- | --- | --- |")
    for code in sorted(before.keys() | after.keys()):
        print(f"| {code} | {cell(before.get(code, Counter()))} | {cell(after.get(code, Counter()))} |")
    totals = [sum(side.values(), Counter()) for side in (before, after)]
    print(f"| **all** | **{cell(totals[0])}** | **{cell(totals[1])}** |")
    for name, total in zip(("before", "after"), totals):
        all_count = sum(total.values())
        if all_count:
            print(f"\n{name}: worth acting on {total['true'] / all_count:.0%}, false {total['false'] / all_count:.0%}.", end="")
    print()


def repos(args: argparse.Namespace) -> None:
    document = json.loads(Path(args.results).read_text())
    per_repo = Counter(d["repo"] for d in results(args.results))
    print("| Name | Repository | Commit | Functions | Diagnostics |")
    print("| --- | --- | --- | ---: | ---: |")
    for repo in pinned_repos():
        functions = document.get("functions", {}).get(repo.name, "")
        print(f"| {repo.name} | {repo.slug} | `{repo.commit[:12]}` | {functions} | {per_repo[repo.name]} |")


def unjudged(args: argparse.Namespace) -> None:
    judged = judgements(args.judgements)
    earlier = {key_of(d): d["message"] for d in results(args.before)} if args.before else {}
    for diagnostic in results(args.results):
        row = judgement(judged, diagnostic)
        key = key_of(diagnostic)
        # A general judgement was made on the earlier message; a new reason needs a new look.
        changed = row is not None and not row.get("message_contains") and key in earlier and earlier[key] != diagnostic["message"]
        if row is None or changed:
            mark = "  [message changed; judged " + row["verdict"] + "]" if changed and row else ""
            print(f"{diagnostic['repo']},{diagnostic['path']},{diagnostic['line']},{diagnostic['code']}  {diagnostic['message']}{mark}")


_DEFAULT_RULES_HELP = (
    "count only the rules on by default (what a plain `check` reports; the same as a "
    "`run --selection default`, since no rule's findings depend on which others are selected)"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="extract the pinned repositories and lint them")
    run_parser.add_argument("--tool", default=str(Path(sys.executable).parent / "autograd-lint"))
    run_parser.add_argument("--out", default="accuracy-results.json")
    run_parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    run_parser.add_argument("--realcode", type=Path, default=Path("/work/realcode"))
    run_parser.add_argument("--only", nargs="*", default=[])
    run_parser.add_argument("--count-functions", action="store_true", help="also count the Functions of each tree")
    run_parser.add_argument("--selection", choices=("all", "default"), default="all",
                            help="every rule (default), or the rules a plain `check` runs")
    run_parser.set_defaults(handler=run)
    for name, handler in (("table", table), ("unjudged", unjudged), ("repos", repos)):
        sub = commands.add_parser(name)
        sub.add_argument("results")
        sub.add_argument("--judgements", type=Path, default=JUDGEMENTS_FILE)
        sub.add_argument("--default-rules", action="store_true", help=_DEFAULT_RULES_HELP)
        sub.set_defaults(handler=handler)
        if name == "unjudged":
            sub.add_argument("--before", help="earlier results: also list judged places whose message changed")
    compare_parser = commands.add_parser("compare", help="per-rule before/after table")
    compare_parser.add_argument("before")
    compare_parser.add_argument("after")
    compare_parser.add_argument("--judgements", type=Path, default=JUDGEMENTS_FILE)
    compare_parser.add_argument("--default-rules", action="store_true", help=_DEFAULT_RULES_HELP)
    compare_parser.set_defaults(handler=compare)
    args = parser.parse_args()
    if getattr(args, "default_rules", False):
        global _ONLY
        _ONLY = default_rule_codes()
    args.handler(args)


if __name__ == "__main__":
    main()

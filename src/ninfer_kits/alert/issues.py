"""One GitHub issue per failing kit, so that a maintainer hears of a failure once (docs/watch.md,
"When a kit fails"). The issue is found by label and a hidden marker, not its title, and keeps
the last failure's hash in a second hidden line, so the same failure every 6 hours adds nothing.
A write a dropped connection may have done is looked for before it is tried again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, TypeVar

from github import GithubException
from github.Issue import Issue
from github.Repository import Repository

from ninfer_kits.errors import BadInput
from ninfer_kits.log import Reporter
from ninfer_kits.net.github_client import client, explanation, failure, transient
from ninfer_kits.net.remote import Secret, redact
from ninfer_kits.net.retry import RetryPolicy, once

T = TypeVar("T")

LABEL: Final = "ninfer-kits-rebuild"
_MARKER: Final = "<!-- ninfer-kits:kit={} -->"
_LAST: Final = "<!-- ninfer-kits:last={} -->"
_LAST_LINE: Final = re.compile(r"^<!-- ninfer-kits:last=([0-9a-f]{16}) -->[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class Failure:
    """What failed: the workflow's step, what it said, the run's log."""

    step: str
    detail: str = ""
    log: str = ""

    @property
    def state(self) -> str:
        """What "the same failure" means: step and detail (a log URL differs every run)."""
        return hashlib.sha256(f"{self.step}\n{self.detail}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Done:
    """What alert did: `action` ∈ opened, commented, unchanged, closed, none; the issue."""

    action: str
    number: int | None = None
    url: str = ""


def marker(kit: str) -> str:
    return _MARKER.format(kit)


def last_state(body: str | None) -> str | None:
    match = _LAST_LINE.search(body or "")
    return match[1] if match else None


def with_state(body: str | None, state: str) -> str:
    """`body` with its last-state line set (appended if removed), the rest as it was."""
    line = _LAST.format(state)
    text = body or ""
    if _LAST_LINE.search(text):
        return _LAST_LINE.sub(line, text, count=1)
    return f"{text.rstrip()}\n{line}\n"


class KitAlerts:
    """The kit issues of one repository, through GitHub's REST API."""

    def __init__(self, api: str, repository: str, token: Secret, *, retry: RetryPolicy,
                 reporter: Reporter, timeout: float = 30.0) -> None:
        self.api = api
        self.repository = repository
        self._token = token
        self._retry = retry
        self._reporter = reporter
        self._gh = client(api, token, retry, timeout)
        self._repo: Repository = self._gh.withLazy(True).get_repo(repository)

    def failed(self, kit: str, failure_: Failure) -> Done:
        state = failure_.state
        issues = self.open_issues(kit)
        if not issues:
            issue = self._call(f"opening an issue for kit {kit}",
                               once(lambda: self._first(kit),
                                          lambda: self._repo.create_issue(
                                              title=f"rebuild failing: {kit}",
                                              body=_opening(kit, failure_, state),
                                              labels=[LABEL])),
                               write=True)
            if LABEL not in {label.name for label in issue.labels}:
                self._reporter.warning(
                    f"issue #{issue.number} was opened without the label {LABEL} (GitHub drops "
                    f"labels set by a token that cannot push): the next alert cannot find it; "
                    f"label it by hand")
            return Done("opened", issue.number, issue.html_url)
        issue = issues[0]
        if last_state(issue.body) == state:
            return Done("unchanged", issue.number, issue.html_url)
        comment = _changed(failure_, state)
        self._call(f"commenting on issue #{issue.number}",
                   once(lambda: self._last_comment_is(issue, comment),
                              lambda: issue.create_comment(comment)), write=True)
        self._call(f"updating issue #{issue.number}",
                   lambda: issue.edit(body=with_state(issue.body, state)), write=True)
        return Done("commented", issue.number, issue.html_url)

    def fixed(self, kit: str, run: str) -> list[Done]:
        done = []
        for issue in self.open_issues(kit):
            comment = (f"Fixed: kit `{kit}` rebuilt" +
                       (f" in {redact(run)}" if run else "") + ". Closing.\n")
            self._close(issue, comment)
            done.append(Done("closed", issue.number, issue.html_url))
        return done

    def _close(self, issue: Issue, comment: str) -> None:
        self._call(f"commenting on issue #{issue.number}",
                   once(lambda: self._last_comment_is(issue, comment),
                              lambda: issue.create_comment(comment)), write=True)
        self._call(f"closing issue #{issue.number}",
                   lambda: issue.edit(state="closed", state_reason="completed"), write=True)

    def open_issues(self, kit: str) -> list[Issue]:
        """The open issues of `kit` (label and marker; pull requests are not), oldest first."""
        mark = marker(kit)

        def read() -> list[Issue]:
            return [issue for issue in self._repo.get_issues(state="open", labels=[LABEL])
                    if issue.pull_request is None and _has_line(issue.body, mark)]

        found = sorted(self._call(f"listing the open issues labelled {LABEL}", read),
                       key=lambda issue: issue.number)
        if len(found) > 1:
            self._reporter.warning(
                f"kit {kit} has {len(found)} open issues "
                f"({', '.join(f'#{i.number}' for i in found)}); using #{found[0].number}")
        return found

    def _first(self, kit: str) -> Issue | None:
        issues = self.open_issues(kit)
        return issues[0] if issues else None

    def _last_comment_is(self, issue: Issue, body: str) -> bool | None:
        comments = list(issue.get_comments())
        return True if comments and comments[-1].body == body else None

    def _call(self, what: str, operation: Callable[[], T], *, write: bool = False) -> T:
        try:
            return self._retry.call(f"GitHub: {what}", operation, transient, self._reporter)
        except GithubException as error:
            if error.status == 404 and not write:
                raise BadInput(f"GitHub: repository {self.repository} does not exist at "
                               f"{self.api}, or the token from {self._token.source} cannot see "
                               f"it") from None
            if write and error.status in (403, 404):
                raise BadInput(f"GitHub: {what} on {self.repository}: the token from "
                               f"{self._token.source} cannot write its issues (HTTP "
                               f"{error.status}: {explanation(error)}): give the job "
                               f"`permissions: issues: write` (a fine-grained token: Issues: "
                               f"read and write)") from None
            raise failure(what, error, self._token) from None


def _has_line(body: str | None, line: str) -> bool:
    return any(candidate.strip() == line for candidate in (body or "").splitlines())


def _detail_block(detail: str) -> str:
    """The detail as a fenced block (fences longer than any in it), where no HTML comment can
    open (it would hide the rest, or fake a marker)."""
    text = redact(detail).replace("<!--", "<!- -").strip()
    if not text:
        return ""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text}\n{fence}\n"


def _facts(failure_: Failure) -> str:
    log = f"- log: {redact(failure_.log)}\n" if failure_.log else ""
    return f"- step: `{_inline(failure_.step)}`\n{log}"


def _inline(text: str) -> str:
    return " ".join(redact(text).split()).replace("`", "'")


def _opening(kit: str, failure_: Failure, state: str) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f"The scheduled rebuild of kit `{kit}` is failing (since {when}).\n\n"
            f"{_facts(failure_)}\n{_detail_block(failure_.detail)}\n"
            f"Opened by `ninfer-kits alert` from the rebuild workflow. It comments here when "
            f"the kit fails in another way (not when it fails the same way again), and closes "
            f"this issue when a rebuild of the kit succeeds.\n\n"
            f"{marker(kit)}\n{_LAST.format(state)}\n")


def _changed(failure_: Failure, state: str) -> str:
    return (f"Still failing, now otherwise:\n\n{_facts(failure_)}\n"
            f"{_detail_block(failure_.detail)}\n{_LAST.format(state)}\n")

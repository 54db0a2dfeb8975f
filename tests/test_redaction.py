"""hookbus.redaction: the process-wide registry of secrets and the scrubbers built on it."""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any, Iterator
from urllib.parse import quote, quote_plus

import pytest

from hookbus.decision import Decision, HookFailure, Outcome
from hookbus.records import EmitRecord, RunRecord
from hookbus.redaction import (
    CYCLE_MARKER,
    MARKER,
    MIN_SECRET_LENGTH,
    RedactingFilter,
    clear_secrets,
    has_secrets,
    mask,
    mask_value,
    names_a_secret,
    redact,
    redact_decision,
    redact_emit_record,
    redact_outcome,
    redact_record,
    redact_url,
    redact_value,
    register_secret,
)

KEY = "sk-live-0123456789abcdef"


@pytest.fixture(autouse=True)
def empty_registry() -> Iterator[None]:
    clear_secrets()
    yield
    clear_secrets()


def record(**fields: Any) -> RunRecord:
    base: dict[str, Any] = {
        "at": "2026-01-01T00:00:00.000Z",
        "hook_id": "judge",
        "event": "PreToolUse",
        "mode": "sync",
        "status": "allow",
        "duration": 0.1,
    }
    return RunRecord(**{**base, **fields})


# -- the registry ----------------------------------------------------------------------------


def test_a_registered_secret_is_masked_everywhere_in_a_text() -> None:
    register_secret(KEY)
    assert redact(f"Authorization: Bearer {KEY}; again {KEY}.") == (
        f"Authorization: Bearer {MARKER}; again {MARKER}."
    )


def test_nothing_registered_returns_the_same_text() -> None:
    text = f"Bearer {KEY}"
    assert not has_secrets()
    assert redact(text) is text


def test_a_text_without_the_secret_is_returned_as_is() -> None:
    register_secret(KEY)
    text = "nothing to hide here"
    assert redact(text) is text
    assert redact("") == ""


@pytest.mark.parametrize("value", ["", "x", "pw", "1234567", "   abc   ", " " * 20])
def test_short_values_are_not_registered(value: str) -> None:
    """Masking a 2-character "secret" would mask every occurrence of those letters."""
    register_secret(value)
    assert not has_secrets()
    assert redact("a pw of 1234567 and abc x") == "a pw of 1234567 and abc x"


def test_the_minimum_length_is_eight() -> None:
    assert MIN_SECRET_LENGTH == 8
    register_secret("12345678")
    assert redact("id 12345678") == f"id {MARKER}"


def test_non_strings_are_ignored() -> None:
    register_secret(None)  # type: ignore[arg-type]
    register_secret(123456789)  # type: ignore[arg-type]
    assert not has_secrets()


def test_the_json_escaped_forms_of_a_secret_are_masked_too() -> None:
    secret = 'pa"ss/wörd\\42'
    register_secret(secret)
    echoed = json.dumps({"authorization": f"Basic {secret}"})  # \" \\ \u00f6
    assert secret not in json.loads(redact(echoed)).get("authorization", "")
    assert redact(echoed) == json.dumps({"authorization": f"Basic {MARKER}"})
    php_style = json.dumps(secret)[1:-1].replace("/", "\\/")  # some servers escape slashes
    assert redact(f"x {php_style} y") == f"x {MARKER} y"
    assert redact(f"raw {secret}") == f"raw {MARKER}"


def test_overlapping_secrets_are_masked_as_one_span() -> None:
    register_secret("abcdefgh1234")
    register_secret("gh1234ijklmn")
    assert redact("<abcdefgh1234ijklmn>") == f"<{MARKER}>"


def test_a_secret_inside_a_longer_one_leaves_nothing_of_either() -> None:
    register_secret("token-0123456789")
    register_secret("0123456789")
    assert redact("token-0123456789 and 0123456789") == f"{MARKER} and {MARKER}"


def test_adjacent_secrets_are_each_masked() -> None:
    register_secret("AAAAAAAAAA")
    register_secret("BBBBBBBBBB")
    assert redact("AAAAAAAAAABBBBBBBBBB!") == f"{MARKER}{MARKER}!"


def test_regex_characters_in_a_secret_are_literal() -> None:
    register_secret("a.b*c+d?(e)[f]")
    assert redact("a.b*c+d?(e)[f] axbbbc") == f"{MARKER} axbbbc"


def test_registering_is_thread_safe() -> None:
    errors: list[BaseException] = []
    secrets = [f"secret-{n:04d}-xyzzy" for n in range(80)]

    def register(chunk: list[str]) -> None:
        try:
            for secret in chunk:
                register_secret(secret)
                redact(f"check {secret}")
        except BaseException as exc:  # collected: a thread's exception must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=register, args=(secrets[n::8],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == []
    text = " ".join(secrets)
    assert redact(text) == " ".join([MARKER] * len(secrets))


# -- URLs ------------------------------------------------------------------------------------

URLS = [
    ("http://user:s3cret@host/v1", f"http://user:{MARKER}@host/v1"),
    ("https://user:s3cret@host:8443/v1?q=1#f", f"https://user:{MARKER}@host:8443/v1?q=1#f"),
    ("http://user:p%40ss@host/", f"http://user:{MARKER}@host/"),
    ("http://user:pa@ss@host/x", f"http://user:{MARKER}@host/x"),  # the last @ ends userinfo
    ("http://:pw@host", f"http://:{MARKER}@host"),
    ("http://user:pw@[::1]:8080/v1", f"http://user:{MARKER}@[::1]:8080/v1"),
    ("http://user@host/v1", "http://user@host/v1"),  # no password: nothing to hide
    ("http://host/v1", "http://host/v1"),
    ("http://host/a:b@c", "http://host/a:b@c"),  # an @ in the path is not userinfo
    ("http://host?x=a:b@c", "http://host?x=a:b@c"),
    ("//user:pw@host/", f"//user:{MARKER}@host/"),
    ("not a url", "not a url"),
    ("http://user:pw@[::1", f"http://user:{MARKER}@[::1"),  # malformed: no exception
    ("", ""),
]


@pytest.mark.parametrize(("url", "shown"), URLS)
def test_redact_url_hides_the_password_and_keeps_the_rest(url: str, shown: str) -> None:
    assert redact_url(url) == shown


# -- values ----------------------------------------------------------------------------------


def test_redact_value_scrubs_strings_and_keys_at_any_level() -> None:
    register_secret(KEY)
    value: dict[str, Any] = {
        "behavior": "modify",
        "input": {"command": f"curl -H 'Bearer {KEY}'", KEY: [1, f"x{KEY}", (KEY, 2.5, None)]},
        "n": 3,
    }
    assert redact_value(value) == {
        "behavior": "modify",
        "input": {"command": f"curl -H 'Bearer {MARKER}'", MARKER: [1, f"x{MARKER}", (MARKER, 2.5, None)]},
        "n": 3,
    }
    assert KEY in value["input"]  # the input is not changed in place


def test_redact_value_returns_the_same_objects_when_nothing_changes() -> None:
    register_secret(KEY)
    inner = {"command": "ls"}
    value = {"behavior": "modify", "input": inner, "list": [1, "a"]}
    assert redact_value(value) is value
    changed = {"input": inner, "reason": KEY}
    result = redact_value(changed)
    assert result is not changed
    assert result["input"] is inner  # untouched branches are shared, not copied


def test_redact_value_passes_everything_through_when_nothing_is_registered() -> None:
    value = {"a": [KEY]}
    assert redact_value(value) is value
    assert redact_value(KEY) is KEY


def test_redact_value_handles_nesting_far_past_the_recursion_limit() -> None:
    register_secret(KEY)
    depth = sys.getrecursionlimit() * 20
    value: Any = KEY
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    scrubbed = redact_value(value)
    for n in reversed(range(depth)):
        scrubbed = scrubbed[0] if n % 2 else scrubbed["k"]
    assert scrubbed == MARKER


def test_redact_value_cuts_a_cycle() -> None:
    register_secret(KEY)
    value: list[Any] = [KEY]
    value.append(value)
    assert redact_value(value) == [MARKER, CYCLE_MARKER]
    shared = [KEY]
    assert redact_value([shared, shared]) == [[MARKER], [MARKER]]  # shared is no cycle


# -- records ---------------------------------------------------------------------------------


def test_redact_record_is_the_same_object_when_nothing_in_it_is_secret_and_nothing_is_registered() -> None:
    original = record(error="HTTP 401: unauthorized", decision={"behavior": "allow"}, tool_name="bash", thread_id="t-1")
    assert redact_record(original) is original


def test_redact_record_masks_secrets_of_a_known_shape_with_nothing_registered() -> None:
    """A process that has run no prompt hook has registered nothing: the shapes still mask."""
    github = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    original = record(
        status="deny",
        error=f"HTTP 401: Authorization: Bearer {KEY}",
        decision={
            "behavior": "modify", "reason": f"refused {github}", "context": "PGPASSWORD=hunter2hunter2 psql",
            "input": {"command": "git push https://me:Sup3rS3cret@git.example.com/r.git", "api_key": "k-123456"},
        },
        note=f"superseded; it said {github}",
        thread_id=f"t-{github}",
        tool_name=f"bash {github}",
    )
    masked = redact_record(original)
    assert not has_secrets()
    text = json.dumps(masked.log_entry()) + json.dumps(masked.state_run())
    for secret in (KEY, github[4:], "hunter2hunter2", "Sup3rS3cret", "k-123456"):
        assert secret not in text
    assert masked.error == f"HTTP 401: Authorization: Bearer {MARKER}"
    assert masked.decision == {
        "behavior": "modify", "reason": f"refused ghp_{MARKER}", "context": f"PGPASSWORD={MARKER} psql",
        "input": {"command": f"git push https://me:{MARKER}@git.example.com/r.git", "api_key": MARKER},
    }
    assert (masked.note, masked.thread_id, masked.tool_name) == (
        f"superseded; it said ghp_{MARKER}", f"t-ghp_{MARKER}", f"bash ghp_{MARKER}",
    )


def test_a_text_remembered_as_holding_no_shape_still_has_registered_secrets_masked() -> None:
    """Records repeat their texts fire after fire, so a text found to hold no shape of
    secret is remembered; a secret registered later is still found in it, and the memory
    stays bounded however many texts pass."""
    from hookbus import redaction

    plain = "quietly-plain-words"  # a secret no shape would find: only registering it does
    reason = f"refused: the call would print {plain} to the log"
    first = record(status="deny", decision={"behavior": "deny", "reason": reason}, tool_name="bash")
    assert redact_record(first) is first  # nothing registered, and no shape in it
    assert any(reason in text for text in redaction._NO_SHAPE)
    register_secret(plain)
    again = redact_record(record(status="deny", decision={"behavior": "deny", "reason": reason}, tool_name="bash"))
    assert again.decision == {"behavior": "deny", "reason": f"refused: the call would print {MARKER} to the log"}
    for number in range(3 * redaction._NO_SHAPE_TEXTS):
        redact_record(record(error=f"exited with status {number}", tool_name="bash"))
    assert len(redaction._NO_SHAPE) <= redaction._NO_SHAPE_TEXTS
    long_text = "a quiet sentence " * 200
    redact_record(record(error=long_text))
    assert not any(long_text in text for text in redaction._NO_SHAPE)
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    for _ in range(2):  # a text holding a shape is never remembered as clean
        assert redact_record(record(error=f"said {token}", tool_name="bash")).error == f"said ghp_{MARKER}"


def test_redact_emit_record_masks_the_envelope_and_the_decision() -> None:
    envelope = {"tool_name": "bash", "tool_input": {"command": "curl -u bob:hunter2hunter2 https://x", "token": "abc"}}
    original = EmitRecord("2026-01-01T00:00:00.000Z", "PreToolUse", envelope, {"behavior": "deny", "reason": "no sk-" + "a" * 30}, ("g",))
    masked = redact_emit_record(original)
    assert masked.envelope == {"tool_name": "bash", "tool_input": {"command": f"curl -u bob:{MARKER} https://x", "token": MARKER}}
    assert masked.decision == {"behavior": "deny", "reason": f"no sk-{MARKER}"}
    assert original.envelope["tool_input"]["token"] == "abc"  # not changed in place
    clean = EmitRecord("2026-01-01T00:00:00.000Z", "Stop", {"thread_id": "t"}, {"behavior": "allow"}, ())
    assert redact_emit_record(clean) is clean


def test_redact_record_is_the_same_object_when_nothing_in_it_is_secret() -> None:
    register_secret(KEY)
    original = record(error="HTTP 500", decision={"behavior": "context", "context": "ok"}, note="n")
    assert redact_record(original) is original


def test_redact_record_scrubs_error_decision_note_and_thread_id() -> None:
    register_secret(KEY)
    original = record(
        status="deny",
        error=f"answered HTTP 400: Bearer {KEY}",
        decision={"behavior": "deny", "reason": f"echo {KEY}", "context": KEY, "input": {"k": KEY}},
        note=f"superseded {KEY}",
        thread_id=f"t-{KEY}",
    )
    scrubbed = redact_record(original)
    assert scrubbed is not original
    assert scrubbed.error == f"answered HTTP 400: Bearer {MARKER}"
    assert scrubbed.decision == {
        "behavior": "deny",
        "reason": f"echo {MARKER}",
        "context": MARKER,
        "input": {"k": MARKER},
    }
    assert scrubbed.note == f"superseded {MARKER}"
    assert scrubbed.thread_id == f"t-{MARKER}"
    assert (scrubbed.hook_id, scrubbed.status, scrubbed.at) == ("judge", "deny", original.at)
    assert KEY not in json.dumps(scrubbed.log_entry())
    assert KEY not in json.dumps(scrubbed.state_run())
    assert original.error is not None and KEY in original.error  # records are immutable


# -- secrets by their shape ------------------------------------------------------------------

#: (what, the text, the text masked): each masked with nothing registered.
SHAPED = [
    ("OpenAI", "use sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0aB7cD now", f"use sk-proj-{MARKER} now"),
    ("OpenAI legacy", "sk-" + "a1B2" * 12, f"sk-{MARKER}"),
    ("Anthropic", "key=" + "x" and "sk-ant-api03-" + "Zx9_" * 20, f"sk-ant-{MARKER}"),
    ("GitHub", "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 and gho_A1b2C3d4E5f6G7h8I9j0K1l2", f"ghp_{MARKER} and gho_{MARKER}"),
    ("GitHub fine-grained", "github_pat_11ABCDEFG0abcdefghijklmnop_QRSTUVWXYZ0123456789", f"github_pat_{MARKER}"),
    ("GitLab", "glpat-Ab12Cd34Ef56Gh78Ij90", f"glpat-{MARKER}"),
    ("Slack", "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp", f"xoxb-{MARKER}"),
    ("AWS key id", "id AKIAIOSFODNN7EXAMPL3 and ASIAIOSFODNN7EXAMPL3", f"id AKIA{MARKER} and ASIA{MARKER}"),
    ("AWS secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", f"aws_secret_access_key = {MARKER}"),
    ("Google", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", f"AIza{MARKER}"),
    ("Stripe", "sk_live_51Hx0123456789abcdefABCDEF and rk_live_0123456789abcdef", f"sk_live_{MARKER} and rk_live_{MARKER}"),
    ("Hugging Face", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", f"hf_{MARKER}"),
    ("npm", "npm_" + "a1B2c3D4e5" * 4, f"npm_{MARKER}"),
    ("JWT", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", f"jwt eyJ{MARKER}"),
    ("Bearer in curl", "curl -H 'Authorization: Bearer tok3n-abcdef123456' https://api", f"curl -H 'Authorization: Bearer {MARKER}' https://api"),
    ("Basic in --header", 'curl --header "authorization: Basic dXNlcjpodW50ZXIy" x', f'curl --header "authorization: Basic {MARKER}" x'),
    ("a bare bearer", "sent Bearer abcdef0123456789", f"sent Bearer {MARKER}"),
    ("a URL's password", "git clone https://deploy:S3cr3t-Pa55@git.example.com/r.git", f"git clone https://deploy:{MARKER}@git.example.com/r.git"),
    ("a URL's password holding @", "postgres://admin:p@ss:w0rd@db:5432/x", f"postgres://admin:{MARKER}@db:5432/x"),
    ("a private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY----- rest",
     f"-----BEGIN RSA PRIVATE KEY-----{MARKER}-----END RSA PRIVATE KEY----- rest"),
    ("a private key cut short", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt", f"-----BEGIN OPENSSH PRIVATE KEY-----{MARKER}"),
    ("an env password", "PGPASSWORD=hunter2hunter2 psql -h db", f"PGPASSWORD={MARKER} psql -h db"),
    ("a quoted passphrase", 'export DB_PASSWORD="correct horse battery"', f'export DB_PASSWORD="{MARKER}"'),
    ("a query token", "https://x/y?token=abcd1234efgh&page=2", f"https://x/y?token={MARKER}&page=2"),
    ("JSON keys", '{"password": "p1", "api_key": "k2", "client_secret": "s3"}', f'{{"password": "{MARKER}", "api_key": "{MARKER}", "client_secret": "{MARKER}"}}'),
    ("escaped JSON", '{\\"passwd\\":\\"p1\\"}', f'{{\\"passwd\\":\\"{MARKER}\\"}}'),
    ("a flag", "mysql --password hunter2 -u root", f"mysql --password {MARKER} -u root"),
    ("curl -u", "curl -u bob:hunter2 https://x", f"curl -u bob:{MARKER} https://x"),
    ("a cookie", "Cookie: session=abc; csrf=def", f"Cookie: {MARKER}"),
]


@pytest.mark.parametrize(("what", "text", "masked"), SHAPED, ids=[what for what, _, _ in SHAPED])
def test_secrets_of_a_known_shape_are_masked_recognizably(what: str, text: str, masked: str) -> None:
    assert not has_secrets()
    assert mask(text) == masked
    assert mask(masked) == masked  # masking twice changes nothing


ORDINARY = [
    "hook 'guard' denied: rm -rf is not allowed here: rm -rf build",
    "max_tokens=100 and tokens: 5, token_count=3",
    "git log --oneline -5 && git push origin main",
    "https://example.com/path?page=2#top",
    "Basic usage: run the task-0123456789abcdefghijklmn job",
    "uuid 123e4567-e89b-12d3-a456-426614174000 sha 3f2a9c1d0b8e7f6a5d4c3b2a1f0e9d8c7b6a5f4e",
    "if token == expected: pass",
    '{"secret": false, "auth": null, "password_file": "/etc/pw"}',
    "naïve café: rien à cacher",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert mask(text) is text


def test_a_text_is_masked_by_shape_and_by_registration() -> None:
    register_secret("my-registered-secret")
    assert mask("my-registered-secret and ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8") == f"{MARKER} and ghp_{MARKER}"


def test_non_ascii_text_around_a_secret_survives() -> None:
    assert mask("clé naïve password=héllo wörld \ud800") == f"clé naïve password={MARKER} wörld \ud800"
    assert mask("lone \ud800 surrogate token=x\udfff") == f"lone \ud800 surrogate token={MARKER}"


@pytest.mark.parametrize(
    "key", ["password", "DB_PASSWORD", "passwd", "api_key", "X-Api-Key", "apikey", "client_secret", "SECRET_KEY",
            "access-key", "token", "refresh_token", "auth", "Authorization", "Proxy-Authorization", "cookie", "credentials"],
)
def test_keys_named_like_secrets(key: str) -> None:
    assert names_a_secret(key)


@pytest.mark.parametrize("key", ["tokens", "max_tokens", "token_count", "author", "password_file", "secretary", "keys", "k" * 300 + "token"])
def test_keys_not_named_like_secrets(key: str) -> None:
    assert not names_a_secret(key)


def test_mask_value_masks_the_values_of_secret_named_keys_whole() -> None:
    value = {
        "headers": {"Authorization": "Bearer xyz", "X-Api-Key": "k", "Accept": "text/plain"},
        "password": 1234, "secret": False, "token": None,
        "auth": {"user": "bob", "pass": ["x", 2]},
        "max_tokens": 5, "command": "ls",
    }
    assert mask_value(value) == {
        "headers": {"Authorization": f"Bearer {MARKER}", "X-Api-Key": MARKER, "Accept": "text/plain"},
        "password": MARKER, "secret": False, "token": None,
        "auth": {"user": MARKER, "pass": [MARKER, MARKER]},
        "max_tokens": 5, "command": "ls",
    }
    clean = {"a": [1, "b", {"c": None}]}
    assert mask_value(clean) is clean


def test_mask_value_handles_nesting_far_past_the_recursion_limit() -> None:
    depth = sys.getrecursionlimit() * 20
    value: Any = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    masked = mask_value(value)
    for n in reversed(range(depth)):
        masked = masked[0] if n % 2 else masked["k"]
    assert masked == f"ghp_{MARKER}"


def best_of(rounds: int, action: Any) -> float:
    import time

    # This thread's CPU time, not the wall clock: other processes sharing the CPUs (tests
    # run on several pytest-xdist workers) would otherwise stretch one measure and not the other.
    times = []
    for _ in range(rounds):
        started = time.thread_time()
        action()
        times.append(time.thread_time() - started)
    return min(times)


HOSTILE = [
    pytest.param("eyJ" * 20 + "." , id="JWT starts with no end"),
    pytest.param("password=" * 4, id="assignments of assignments"),
    pytest.param("https://a" + ":" * 8, id="URL colons with no @"),
    pytest.param("-----BEGIN PRIVATE KEY-----" + "A" * 8, id="key blocks with no end"),
    pytest.param("sk-" + "a" * 19 + " ", id="keys one short"),
    pytest.param("Authorization: " * 3, id="headers of headers"),
    pytest.param("token=a ", id="a secret every 8 bytes"),
    pytest.param("x=1 password=abc https://u:p@h/ Bearer abcdefghij AKIAABCDEFGHIJKLMNOP ", id="every shape at once"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("unit", HOSTILE)
def test_masking_a_hostile_text_takes_time_linear_in_it(unit: str) -> None:
    """Four times the text takes about four times the time (a search quadratic in it would
    take sixteen times, a backtracking one hours): measured against the same text of a
    quarter of the size, in the same test."""
    quarter = unit * ((1 << 18) // len(unit))
    whole = quarter * 4
    assert mask(whole[:1000]) is not None  # compiled before anything is timed
    small = best_of(5, lambda: mask(quarter))
    large = best_of(5, lambda: mask(whole))
    assert large < 8 * small, (small, large)


# -- logging ---------------------------------------------------------------------------------


@pytest.fixture
def redacting_logger(caplog: pytest.LogCaptureFixture) -> Iterator[logging.Logger]:
    logger = logging.getLogger("hookbus.test-redaction")
    redacting = RedactingFilter()
    logger.addFilter(redacting)
    caplog.set_level(logging.DEBUG, logger=logger.name)
    yield logger
    logger.removeFilter(redacting)


def test_the_filter_scrubs_the_rendered_message(
    redacting_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    register_secret(KEY)
    redacting_logger.warning("provider said %r for %s", f"Bearer {KEY}", "judge")
    assert KEY not in caplog.text
    assert f"provider said 'Bearer {MARKER}' for judge" in caplog.text


def test_the_filter_leaves_clean_records_alone(
    redacting_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    register_secret(KEY)
    redacting_logger.info("hook %s fired", "judge")
    (logged,) = caplog.records
    assert (logged.msg, logged.args) == ("hook %s fired", ("judge",))


def test_the_filter_scrubs_exception_text(
    redacting_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    register_secret(KEY)
    try:
        raise ValueError(f"the server echoed Bearer {KEY}")
    except ValueError:
        redacting_logger.exception("a prompt provider failed on hook %r", "judge")
    assert "a prompt provider failed on hook 'judge'" in caplog.text
    assert f"ValueError: the server echoed Bearer {MARKER}" in caplog.text
    assert KEY not in caplog.text
    (logged,) = caplog.records
    assert logged.exc_info is None  # no handler can render the original traceback again


def test_the_filter_scrubs_stack_info_and_mismatched_arguments(
    redacting_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    register_secret(KEY)
    redacting_logger.info(f"key {KEY}", stack_info=True)
    redacting_logger.info("two %s %s but one", KEY)
    assert KEY not in caplog.text
    for logged in caplog.records:
        assert KEY not in str(logged.msg)
        assert KEY not in (logged.stack_info or "")


def test_the_filter_costs_nothing_without_secrets(
    redacting_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    redacting_logger.info("key %s", KEY)
    (logged,) = caplog.records
    assert logged.args == (KEY,)  # nothing registered: nothing touched


def test_trigger_returns_the_record_as_recorded_with_secrets_masked(make_bus: Any, write_hook: Any, home: Any) -> None:
    """trigger()'s record is what `hookbus trigger` prints and `hookbus serve` sends: a
    secret a hook echoed is masked there as in the log."""
    secret = "sk-live-0123456789abcdef"
    register_secret(secret)
    write_hook("echo", event="Stop", mode="sync", command=f"echo 'leaked {secret}' >&2; exit 2")
    record = make_bus().trigger("echo")
    assert secret not in json.dumps(record.log_entry())
    assert "[redacted]" in json.dumps(record.log_entry())


# -- echoes cut short or encoded -------------------------------------------------------------

#: With the characters a %-encoding changes.
URL_KEY = "sk-proj-ab/Q3+x9=Zt7Lm2Kp8Vw4wxyz"


def runs_left(text: str, secret: str) -> list[str]:
    """The runs of MIN_SECRET_LENGTH characters of ``secret`` still in ``text``."""
    size = MIN_SECRET_LENGTH
    return sorted({secret[n : n + size] for n in range(len(secret) - size + 1) if secret[n : n + size] in text})


def test_openais_echo_of_a_key_cut_short_is_masked() -> None:
    """OpenAI's 401: "Incorrect API key provided: sk-proj-ab****wxyz": a prefix of the key,
    stars, its last 4 (too short to mask: 4 characters say nothing)."""
    register_secret(URL_KEY)
    echo = f"Incorrect API key provided: {URL_KEY[:10]}{'*' * 20}{URL_KEY[-4:]}."
    assert redact(echo) == f"Incorrect API key provided: {MARKER}{'*' * 20}{URL_KEY[-4:]}."


@pytest.mark.parametrize("cut", [8, 9, 20, len(URL_KEY) - 1])
def test_every_prefix_and_suffix_of_eight_characters_or_more_is_masked(cut: int) -> None:
    register_secret(URL_KEY)
    assert redact(f"<{URL_KEY[:cut]}>") == f"<{MARKER}>"
    assert redact(f"<{URL_KEY[-cut:]}>") == f"<{MARKER}>"


def test_a_run_cut_from_the_middle_of_a_key_is_not_looked_for() -> None:
    """The documented bound: finding any run of any secret would cost a search per run in
    every text hookbus scrubs. Echoes keep a key's start or its end, or both."""
    register_secret(URL_KEY)
    middle = f"...{URL_KEY[5:19]}..."
    assert redact(middle) is middle
    assert redact(f"...{URL_KEY[5:]}") == f"...{MARKER}"


def test_fewer_than_eight_characters_of_a_key_stay() -> None:
    """The rule for short secrets holds for pieces of long ones: 7 characters are words."""
    register_secret(URL_KEY)
    text = f"{URL_KEY[:7]} and {URL_KEY[-7:]} and {URL_KEY[10:17]}"
    assert redact(text) is text


@pytest.mark.parametrize(
    "spelling",
    [quote(URL_KEY, safe=""), quote(URL_KEY), quote_plus(URL_KEY), quote(URL_KEY, safe="")[:20]],
    ids=["quote-safe-none", "quote", "quote-plus", "quote-cut-short"],
)
def test_a_key_percent_encoded_in_a_url_is_masked(spelling: str) -> None:
    register_secret(URL_KEY)
    scrubbed = redact(f"https://api.example.test/v1?key={spelling}&x=1")
    assert scrubbed == f"https://api.example.test/v1?key={MARKER}&x=1"
    assert runs_left(scrubbed, spelling) == []


def test_a_password_with_a_space_is_masked_in_quote_plus_and_whole() -> None:
    secret = "open sesame 2024!"
    register_secret(secret)
    assert redact(f"u={quote_plus(secret)}") == f"u={MARKER}"
    assert redact(f"said: {secret}.") == f"said: {MARKER}."


def test_runs_of_a_passphrase_that_hold_whitespace_are_not_masked() -> None:
    """Its runs across a space are ordinary words: masking them would mangle records."""
    register_secret("correct horse battery staple")
    text = "a horse battery for the staple gun, correct"
    assert redact(text) is text
    assert redact("correct horse battery staple") == MARKER


# -- decisions and outcomes ------------------------------------------------------------------


def a_decision(text: str) -> Decision:
    failed = (HookFailure("scan", f"exited with status 1: {text}", "crash", closed=True),)
    return Decision(
        "deny", reason=f"hook 'scan' denied: {text}", input={"command": f"curl -H 'Bearer {text}'"},
        context=f"note {text}", continue_with=f"go on {text}", halt=f"stop {text}", denied_by=("scan",), failed=failed,
    )


def test_redact_decision_masks_what_it_says_and_leaves_its_input() -> None:
    """A rewritten input is an instruction to run: masking it would run something else."""
    register_secret(KEY)
    scrubbed = redact_decision(a_decision(KEY))
    assert (scrubbed.reason, scrubbed.context) == (f"hook 'scan' denied: {MARKER}", f"note {MARKER}")
    assert (scrubbed.continue_with, scrubbed.halt) == (f"go on {MARKER}", f"stop {MARKER}")
    assert scrubbed.failed == (HookFailure("scan", f"exited with status 1: {MARKER}", "crash", closed=True),)
    assert scrubbed.input == {"command": f"curl -H 'Bearer {KEY}'"}
    assert (scrubbed.behavior, scrubbed.denied_by) == ("deny", ("scan",))


def test_redact_decision_is_the_same_object_without_secrets_or_without_a_match() -> None:
    decision = a_decision(KEY)
    assert redact_decision(decision) is decision
    register_secret("something-else-entirely")
    assert redact_decision(decision) is decision


def test_redact_outcome_masks_everything_but_the_verdict() -> None:
    register_secret(KEY)
    outcome = Outcome(
        "modify", input={"k": KEY}, context=KEY, error=f"e {KEY}", thread_id=KEY, failure="crash", halt=KEY,
    )
    scrubbed = redact_outcome(outcome)
    assert scrubbed == Outcome(
        "modify", input={"k": MARKER}, context=MARKER, error=f"e {MARKER}", thread_id=MARKER, failure="crash", halt=MARKER,
    )
    clean = Outcome("deny", reason="no")
    assert redact_outcome(clean) is clean


@pytest.mark.timeout(120)
def test_masking_many_strings_takes_time_linear_in_them() -> None:
    """A decision of a hundred thousand short strings, one of them a secret: one pass finds
    which to mask, so four times the strings take about four times the time."""
    quarter: list[Any] = ["abcdefgh", {"k": "ijklmnop"}] * 12_500
    whole = quarter * 4
    quarter_secret, whole_secret = [*quarter, "password=x"], [*whole, "password=x"]
    assert mask_value(quarter_secret)[-1] == f"password={MARKER}"
    small = best_of(5, lambda: mask_value(quarter_secret))
    large = best_of(5, lambda: mask_value(whole_secret))
    assert large < 8 * small, (small, large)
    assert mask_value(whole) is whole


def test_past_the_bound_of_matches_the_rest_of_a_text_is_masked_whole() -> None:
    from hookbus.redaction import MAX_MATCHES_PER_SHAPE

    many = " ".join(f"token=t{n}" for n in range(MAX_MATCHES_PER_SHAPE + 50))
    masked = mask(many)
    assert "t1 " not in masked and not any(f"t{n}" in masked for n in range(MAX_MATCHES_PER_SHAPE + 50))
    assert masked.startswith(f"token={MARKER} token={MARKER}")
    strings = [f"token=t{n}" for n in range(MAX_MATCHES_PER_SHAPE + 50)]
    assert not any(f"t{n}" in text for n, text in enumerate(mask_value(strings)))


def test_a_private_key_cut_short_masks_no_other_string_of_the_record() -> None:
    """A key block without its END (a stderr tail, a heredoc cut off) runs to the end of its
    own text, not over the strings met after it: those are masked only for what they hold."""
    envelope = {
        "cwd": "/home/user/project", "hook_event_name": "PreToolUse", "session_id": "session-123",
        "notes": ["an ordinary note", "token=abc123"],
        "tool_input": {"command": "cat <<EOF\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1Lf"},
    }
    original = EmitRecord("2026-01-01T00:00:00.000Z", "PreToolUse", envelope, {"behavior": "allow"}, ("g",))
    assert redact_emit_record(original).envelope == {
        **envelope,
        "notes": ["an ordinary note", f"token={MARKER}"],
        "tool_input": {"command": f"cat <<EOF\n-----BEGIN RSA PRIVATE KEY-----{MARKER}"},
    }

"""Settings changed while the server runs: ``workspace/didChangeConfiguration``, pushed or pulled.

A client sends the options either in the notification's ``settings`` (``{"laya": {...}}``, or
the options object itself, as Helix sends its ``config``; other servers' sections are ignored) or,
when ``settings`` is null or empty, the server asks for the ``laya`` section with
``workspace/configuration`` (if the client declared ``workspace.configuration``), waiting at most
:data:`PULL_TIMEOUT_S` on a task of its own: no completion waits for it, and an error answer or
none leaves the options as they are. A newer change supersedes one still waiting for its answer.

The values go through :func:`.config.parse_options`, the code ``initializationOptions`` go
through, with the current values as the base: a key left out or ``null`` keeps its current value,
a bad one is shown with ``window/showMessage`` as at start and keeps its current value. The
options in :data:`LIVE` apply at once; the others are read only at start, and a change to them is
named in one ``window/showMessage`` (Info) saying a restart applies them. Values equal to those
already asked for produce no message, and neither does a settings object equal to the last one.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.capabilities import get_capability

from engine import languages

from . import logging_setup
from .config import OPTION_NAME, OPTION_NAMES, InitializationOptions, parse_options

if TYPE_CHECKING:
    from .server import LayaServer

log = logging.getLogger(__name__)

SECTION = "laya"
"""The settings section holding Laya's options (``settings.laya``; ``workspace/configuration``)."""
PULL_TIMEOUT_S = 5.0
"""Longest wait for the client's answer to ``workspace/configuration``."""
LIVE = frozenset({"debounce_ms", "max_items", "enable_inline", "log_level", "workspace_index", "prose"})
"""Options a running server applies at once (``enable_inline`` only when inline completion was
registered at start); the rest (the model, the variant, the backend, System 2, the parent watch,
the line breaks) are read once, at start."""
RESTART = tuple(f.name for f in fields(InitializationOptions) if f.name not in LIVE)
"""Options that need a restart of the server."""


@dataclass
class SettingsState:
    """What the client asked for so far (loop thread)."""

    requested: InitializationOptions = field(default_factory=InitializationOptions)
    """The options asked for: the running ones, plus restart-only values not applied yet."""
    last_raw: Any = None
    """The last options object received (``initializationOptions`` or a settings change)."""
    generation: int = 0
    """Counts changes; a pull whose change is no longer the latest is dropped."""

    def started(self, options: InitializationOptions, raw: Any) -> None:
        """``initialize``: the options in force and the object they came from."""
        self.requested = options
        self.last_raw = raw
        self.generation += 1


def show_problems(ls: LayaServer, problems: list[str], source: str) -> None:
    """Show bad or unknown options in one ``window/showMessage`` (Warning), as at start."""
    if problems:
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning,
            message=f"Laya: problems in {source} (the rest apply): " + "; ".join(problems)))


CLIENT_ONLY = frozenset({"serverPath"})
"""Settings of the ``laya`` section that an editor client keeps for itself (VS Code's extension:
which ``laya-lsp`` to start): not options of the server, so not reported as unknown ones."""


def section_of(settings: Any) -> Any:
    """Laya's options in a pushed (or pulled) ``settings`` value, or None when it holds none.

    ``{"laya": {...}}`` gives the inner object; otherwise the keys that are not other servers'
    sections (an object under a name that is no option) are taken as the options themselves.
    The client's own settings (:data:`CLIENT_ONLY`) are left out.
    """
    if not isinstance(settings, dict):
        return settings  # parse_options reports a value that is not an object
    if SECTION in settings:
        inner = settings[SECTION]
        return {k: v for k, v in inner.items() if k not in CLIENT_ONLY} if isinstance(inner, dict) else inner
    options = {k: v for k, v in settings.items()
               if not (isinstance(v, dict) and k not in OPTION_NAMES) and k not in CLIENT_ONLY}
    return options or None


def _empty(settings: Any) -> bool:
    return settings is None or settings == {} or settings == [] or settings == ""


async def did_change_configuration(ls: LayaServer, params: types.DidChangeConfigurationParams) -> None:
    """Handle ``workspace/didChangeConfiguration``: apply pushed settings, or pull the ``laya``
    section when none came (see the module doc)."""
    state = ls.settings
    state.generation += 1
    generation = state.generation
    if not _empty(params.settings):
        raw = section_of(params.settings)
        if raw is None:
            log.debug("didChangeConfiguration without a %r section or options: ignored", SECTION)
            return
        apply(ls, raw, "settings")
        return
    if not get_capability(ls.client_capabilities, "workspace.configuration", False):
        log.debug("didChangeConfiguration without settings, and the client cannot be asked: ignored")
        return
    raw = await pull(ls)
    if generation != state.generation:
        log.debug("workspace/configuration answer dropped: a newer change came meanwhile")
        return
    if raw is not None:
        apply(ls, section_of({SECTION: raw}), f"the {SECTION!r} settings")


async def pull(ls: LayaServer) -> Any:
    """Ask the client for the ``laya`` section (``workspace/configuration``).

    Returns:
        The section's value, or None when the client has none, answers with an error, or does not
        answer within :data:`PULL_TIMEOUT_S` (logged as a warning).
    """
    msg_id = f"laya-configuration-{uuid.uuid4()}"
    params = types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
    future = ls.protocol.send_request(types.WORKSPACE_CONFIGURATION, params, msg_id=msg_id)
    try:
        result = await asyncio.wait_for(asyncio.wrap_future(future), PULL_TIMEOUT_S)
    except asyncio.TimeoutError:
        log.warning("workspace/configuration: no answer in %.0f s; settings unchanged", PULL_TIMEOUT_S)
        return None
    except Exception as e:  # noqa: BLE001 - an error answer: the client cannot tell, nothing changes
        log.warning("workspace/configuration failed (%s); settings unchanged", e)
        return None
    finally:
        ls.protocol.forget_request(msg_id)
    return result[0] if isinstance(result, (list, tuple)) and result else None


def apply(ls: LayaServer, raw: Any, source: str) -> None:
    """Validate a new options object against the current values and apply what a running server
    can; show its problems, and the options that need a restart."""
    state = ls.settings
    if _same(raw, state.last_raw):
        log.debug("%s unchanged: nothing to do", source)
        return
    state.last_raw = raw  # decoded for this notification alone: nothing else holds or changes it
    requested, problems = parse_options(raw, state.requested, source=source)
    for problem in problems:
        log.warning("%s: %s", source, problem)
    show_problems(ls, problems, source)
    changed = [f.name for f in fields(requested)
               if getattr(requested, f.name) != getattr(state.requested, f.name)]
    state.requested = requested
    if not changed:
        return
    live = {name: getattr(requested, name) for name in changed if _is_live(ls, name)}
    restart = [name for name in changed
               if name not in live and getattr(requested, name) != getattr(ls.options, name)]
    before, ls.options = ls.options, replace(ls.options, **live)
    log.info("%s asked for %s", source,
             ", ".join(f"{OPTION_NAME[n]}={getattr(requested, n)!r}" for n in changed))
    _take_effect(ls, before, ls.options)
    if restart:
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Info,
            message=f"Laya: restart the server to apply {', '.join(OPTION_NAME[n] for n in restart)}: "
                    "they are read from initializationOptions at start; until then the running "
                    "server keeps its current values"))


def _same(a: Any, b: Any) -> bool:
    try:
        return a == b
    except RecursionError:  # nested deeper than Python compares: treat as changed
        return False


def _is_live(ls: LayaServer, name: str) -> bool:
    if name == "enable_inline":  # turning it on needs the capability, advertised at start
        return types.TEXT_DOCUMENT_INLINE_COMPLETION in ls.protocol.fm.features
    return name in LIVE


def _take_effect(ls: LayaServer, before: InitializationOptions, after: InitializationOptions) -> None:
    """Apply the options that changed and are read other than per request."""
    if after.log_level != before.log_level:
        if ls.cli_log_level:
            log.info("logLevel %r: --log-level %s overrides it", after.log_level, ls.cli_log_level)
        else:
            logging_setup.set_level(after.log_level)
    if after.workspace_index != before.workspace_index:
        ls.workspace_index.set_enabled(after.workspace_index)
    if after.prose != before.prose:  # open prose documents: count them for the model now serving them
        for uri in list(ls.opened):
            doc = ls.open_document(uri)
            if doc is not None and languages.for_document(doc.language_id, uri).name == languages.PROSE.name:
                ls.observe(uri)

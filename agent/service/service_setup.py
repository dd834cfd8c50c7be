"""What an agent service is started with, and what follows from it: fixed for the service's life,
read by every part of it (sessions, passes, boundaries, publishing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpualloc.agent.service.clock import Clock
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.ledger import run_settings
from gpualloc.bus import clients
from gpualloc.bus.topics import Topics
from gpualloc.schemas.settings import AgentSettings
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.policies import OnlinePolicy, online_policy


@dataclass(frozen=True)
class ServiceSetup:
    """The pool agent on `bootstrap`, as `settings` say; the rest follows from them."""

    bootstrap: clients.Broker | str
    settings: AgentSettings
    topics: Topics
    pool: str
    initial_config: bytes | None  # a pool.configured message to start with (`--config`)
    partition: int | None  # the one partition of each input topic to read (a shared group's pool); None: all
    clock: Clock
    policy: OnlinePolicy  # the online policy `settings` name
    run_info: dict[str, Any]  # what a replay needs to plan as this agent does (`run_settings`)
    group_id: str  # the consumer group its consumed offsets go to (lag monitoring)

    @classmethod
    def of(
        cls,
        bootstrap: clients.Broker | str,
        settings: AgentSettings,
        topics: Topics,
        pool: str,
        initial_config: bytes | None,
        partition: int | None,
        clock: Clock,
    ) -> ServiceSetup:
        """The setup of an agent started with these, the rest derived from `settings`."""
        group_id = settings.group_id or f"gpualloc-agent-{pool}"
        return cls(
            bootstrap,
            settings,
            topics,
            pool,
            initial_config,
            partition,
            clock,
            online_policy(settings.policy),
            run_settings(settings),
            group_id,
        )

    def fresh(self) -> Dispatcher:
        """A dispatcher of an empty pool, planning as this agent does."""
        d = Dispatcher(self.pool, self.topics, Pool(pending_limit=self.settings.pending_limit))
        d.use(self.run_info)
        return d

"""Topics that fit the cluster they are made on: no more replicas than brokers, no more in sync
required than replicas, set on each topic (not left to the cluster's default), and an agent's
run on the one-broker test cluster without a NotEnoughReplicas warning from its clients."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from support.kafka_broker import unique_topic
from test_agent_failures import publish
from test_full_mode_visible import trial

from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus import clients
from gpualloc.bus.admin import replicas
from gpualloc.bus.topics import Topics
from gpualloc.schemas.settings import AgentSettings, RollingFullMode

TOPIC_CONFIG = 1  # DescribeConfigs' config_source of a value set on the topic itself


@pytest.mark.parametrize(
    "factor,in_sync,brokers,fit",
    [(3, 2, 1, (1, 1)), (3, 2, 2, (2, 2)), (3, 2, 3, (3, 2)), (3, 2, 5, (3, 2)), (1, 2, 3, (1, 1)), (5, 5, 0, (1, 1))],
)
def test_replicas_fit_the_brokers_and_in_sync_fits_the_replicas(factor, in_sync, brokers, fit):
    assert replicas(factor, in_sync, brokers) == fit


@pytest.mark.kafka
async def test_an_agent_on_one_broker_makes_topics_that_fit_it_and_no_write_waits_for_replicas(kafka_bootstrap, caplog):
    topics = Topics.with_prefix(unique_topic("replicas") + ".")
    caplog.set_level(logging.WARNING)
    settings = AgentSettings(step_seconds=0.5, full_mode=RollingFullMode(every=0), group_id=unique_topic("g"))
    assert (settings.replication_factor, settings.min_insync_replicas) == (3, 2)  # production's, fitted below
    agent = AgentService(kafka_bootstrap, settings, topics)
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(agent.run(stop, ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        await publish(kafka_bootstrap, topics, trial())  # transactions with decisions and commits (acks=all)
        for _ in range(200):
            if agent.stats.commits >= 6 and agent.stats.decisions >= 20:
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert agent.stats.commits >= 6 and agent.stats.decisions >= 20
    said = [r.getMessage() for r in caplog.records if "NotEnoughReplicas" in r.getMessage()]
    assert not said, said[:3]
    admin = await clients.started(clients.admin(kafka_bootstrap), "test admin")
    try:
        brokers = len((await admin.describe_cluster())["brokers"])
        names = [topics.state, topics.ledger, *topics.inputs, topics.decisions, topics.commits, topics.deadletter]
        factor, in_sync = replicas(3, 2, brokers)
        for described in await admin.describe_topics(names):
            assert all(len(p["replicas"]) == factor for p in described["partitions"]), described
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name) for name in names])
    finally:
        await admin.close()
    entries = {res[3]: {e[0]: e for e in res[4]} for r in responses for res in r.resources}
    assert set(entries) == set(names)
    for name, config in entries.items():
        value, source = config["min.insync.replicas"][1], config["min.insync.replicas"][3]
        assert (value, source) == (str(in_sync), TOPIC_CONFIG), name

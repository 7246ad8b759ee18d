"""Advertised listeners (Pulsar's advertisedListeners): which address a lookup answers, and
which listener a connection belongs to when its client named none (the address it came in at),
so that a transfer sends the client to the next owner's address on that same listener."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.ownership import BrokerInfo, Owner, UnknownListenerError, lookup_urls, web_url

LISTENERS = (
    "pod-ip:pulsar://10.244.0.7:6650,pod-ip:pulsar+ssl://10.244.0.7:6651,"
    "outside:pulsar://broker-0.example.com:16650"
)


def test_a_connection_to_an_advertised_ip_and_port_belongs_to_that_listener() -> None:
    config = BrokerConfig(advertised_listeners=LISTENERS)
    assert config.listener_at("10.244.0.7", 6650) == "pod-ip"
    assert config.listener_at("10.244.0.7", 6651) == "pod-ip"  # its TLS port


def test_any_other_address_is_the_default_listener() -> None:
    config = BrokerConfig(advertised_listeners=LISTENERS)
    assert config.listener_at("10.244.0.7", 8080) is None  # same host, another port
    assert config.listener_at("127.0.0.1", 6650) is None
    # compared as written, never resolved: a listener advertised by name matches only that name
    assert config.listener_at("broker-0.example.com", 16650) == "outside"
    assert config.listener_at("10.0.0.9", 16650) is None
    assert BrokerConfig().listener_at("10.244.0.7", 6650) is None


def test_the_next_owner_is_named_on_the_clients_listener_with_its_tls_address() -> None:
    owner = BrokerInfo(
        "b1",
        "pulsar://b1.ns.svc:6650",
        "http://b1.ns.svc:8080",
        "r1",
        listeners={"pod-ip": "pulsar://10.244.0.8:6650"},
        service_url_tls="pulsar+ssl://b1.ns.svc:6651",
        listeners_tls={"pod-ip": "pulsar+ssl://10.244.0.8:6651"},
    )
    urls = lookup_urls(owner, "pod-ip")
    assert (urls.url, urls.url_tls) == ("pulsar://10.244.0.8:6650", "pulsar+ssl://10.244.0.8:6651")
    default = lookup_urls(owner, None)
    assert (default.url, default.url_tls) == ("pulsar://b1.ns.svc:6650", "pulsar+ssl://b1.ns.svc:6651")
    with pytest.raises(UnknownListenerError, match="outside"):
        lookup_urls(owner, "outside")


def test_admin_calls_are_redirected_to_the_owner_on_the_requests_listener() -> None:
    config = BrokerConfig(
        advertised_listeners="pod-ip:pulsar://10.244.0.8:6650,pod-ip:http://10.244.0.8:8080,"
        "pod-ip:https://10.244.0.8:8443"
    )
    assert config.listener_at("10.244.0.8", 8443) == "pod-ip"  # an admin call over the pod's https port
    owner = BrokerInfo(
        "b1",
        "pulsar://b1.ns.svc:6650",
        "http://b1.ns.svc:8080",
        "r1",
        listeners=config.listeners(),
        web_service_url_tls="https://b1.ns.svc:8443",
        web_listeners=config.listeners_web(),
        web_listeners_tls=config.listeners_web_tls(),
    )
    assert web_url(owner, "pod-ip", secure=True) == "https://10.244.0.8:8443"
    assert web_url(owner, "pod-ip", secure=False) == "http://10.244.0.8:8080"
    assert web_url(owner, None, secure=True) == "https://b1.ns.svc:8443"
    # a listener without web URLs: the default ones, as Pulsar's redirects always are
    assert web_url(replace(owner, web_listeners={}, web_listeners_tls={}), "pod-ip", secure=False) == (
        "http://b1.ns.svc:8080"
    )


def test_the_bundle_owner_record_keeps_every_listener_address() -> None:
    owner = Owner(
        "b1",
        "pulsar://b1:6650",
        "http://b1:8080",
        listeners=(("pod-ip", "pulsar://10.244.0.8:6650"),),
        web_listeners=(("pod-ip", "http://10.244.0.8:8080"),),
        web_listeners_tls=(("pod-ip", "https://10.244.0.8:8443"),),
    )
    assert Owner.decode(owner.encode()) == owner
    # Pulsar's readers see their AdvertisedListener fields where they expect them
    assert json.loads(owner.encode())["advertisedListeners"]["pod-ip"]["brokerServiceUrl"] == (
        "pulsar://10.244.0.8:6650"
    )


def test_a_listener_that_is_not_a_url_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="ftp://h:1"):
        BrokerConfig(advertised_listeners="x:ftp://h:1").listeners()

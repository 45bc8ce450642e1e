"""Objects: CRUD, namespaces, IF NOT EXISTS, dependencies, DROP ... CASCADE, lookups."""

from __future__ import annotations

import enum
import time

import pytest

from catalog_store import (
    CatalogStore,
    DependentObjectsError,
    ObjectExistsError,
    ObjectNotFoundError,
    StoreError,
)


def _pipeline(store: CatalogStore) -> None:
    """secret pw <- connection cat <- sink s1 ; source events <- view v <- sink s1, s2."""
    store.create_secret("pw", "hunter2")
    store.create_object(
        "connection", "cat", "CREATE CONNECTION cat ...", {"type": "rest"}, [("secret", "pw")]
    )
    store.create_object("source", "events", "CREATE SOURCE events ...", {"format": "json"})
    store.create_object(
        "view", "v", "CREATE VIEW v AS SELECT * FROM events", {"query": "x"}, [("source", "events")]
    )
    store.create_object(
        "sink", "s1", "CREATE SINK s1 ...", {"mode": "append"}, [("view", "v"), ("connection", "cat")]
    )
    store.create_object("sink", "s2", "CREATE SINK s2 ...", {"mode": "append"}, [("view", "v")])


def test_create_get_roundtrip(store: CatalogStore) -> None:
    before = time.time()
    definition = {"format": "json", "schema": "id BIGINT", "nested": {"a": [1, 2.5, None, True]}}
    assert store.create_object("source", "events", "CREATE SOURCE events ...", definition) is True
    obj = store.get_object("source", "events")
    assert obj is not None
    assert (obj.kind, obj.name, obj.sql) == ("source", "events", "CREATE SOURCE events ...")
    assert obj.definition == definition
    assert obj.dependencies == ()
    assert before <= obj.created_at == obj.updated_at <= time.time()
    assert len(obj.object_id) == 36 and obj.hidden is False
    # Reads return copies: mutating one does not touch the store.
    obj.definition["format"] = "csv"
    again = store.get_object("source", "events")
    assert again is not None and again.definition["format"] == "json"
    assert store.get_object("view", "events") is None
    assert store.get_object("source", "nope") is None


def test_names_are_case_sensitive(store: CatalogStore) -> None:
    store.create_object("source", "Events", "s", {})
    store.create_object("source", "events", "s", {})
    assert [o.name for o in store.list_objects("source")] == ["Events", "events"]


def test_if_not_exists(store: CatalogStore) -> None:
    assert store.create_object("connection", "c", "first", {"n": 1}) is True
    assert store.create_object("connection", "c", "second", {"n": 2}, if_not_exists=True) is False
    obj = store.get_object("connection", "c")
    assert obj is not None and obj.sql == "first" and obj.definition == {"n": 1}
    with pytest.raises(ObjectExistsError) as info:
        store.create_object("connection", "c", "third", {})
    assert (info.value.kind, info.value.name) == ("connection", "c")
    assert str(info.value) == 'connection "c" already exists'


def test_sources_and_views_share_a_namespace(store: CatalogStore) -> None:
    store.create_object("source", "orders", "s", {})
    with pytest.raises(ObjectExistsError) as info:
        store.create_object("view", "orders", "v", {})
    assert info.value.kind == "source"
    assert "source" in info.value.message
    assert store.create_object("view", "orders", "v", {}, if_not_exists=True) is False
    # Other kinds have their own namespaces.
    assert store.create_object("sink", "orders", "k", {}) is True
    assert store.create_object("connection", "orders", "c", {}) is True
    store.create_secret("orders", "x")


def test_missing_dependency_is_refused(store: CatalogStore) -> None:
    with pytest.raises(ObjectNotFoundError) as info:
        store.create_object("view", "v", "v", {}, [("source", "missing")])
    assert (info.value.kind, info.value.name) == ("source", "missing")
    assert 'needed by view "v"' in info.value.message
    assert store.get_object("view", "v") is None  # nothing half-written


def test_dependencies_kept_in_order_and_deduplicated(store: CatalogStore) -> None:
    _pipeline(store)
    s1 = store.get_object("sink", "s1")
    assert s1 is not None and s1.dependencies == (("view", "v"), ("connection", "cat"))
    store.create_object("sink", "s3", "k", {}, [("view", "v"), ("view", "v")])
    assert store.get_object("sink", "s3").dependencies == (("view", "v"),)  # type: ignore[union-attr]


def test_list_objects_sorted_by_kind_then_name(store: CatalogStore) -> None:
    _pipeline(store)
    listed = [(o.kind, o.name) for o in store.list_objects()]
    assert listed == sorted(listed)
    assert ("sink", "s1") in listed and ("secret", "pw") in listed
    assert [o.name for o in store.list_objects("sink")] == ["s1", "s2"]
    by_name = {o.name: o for o in store.list_objects()}
    assert by_name["s1"].dependencies == (("view", "v"), ("connection", "cat"))


def test_find_object(store: CatalogStore) -> None:
    _pipeline(store)
    store.create_object("sink", "events", "k", {}, [("source", "events")])
    found = store.find_object("events")
    assert found is not None and found.kind == "source"  # relations first
    found = store.find_object("events", kinds=["sink"])
    assert found is not None and found.kind == "sink"
    assert store.find_object("pw") is not None
    assert store.find_object("nope") is None
    assert store.find_object("v", kinds=["source"]) is None


def test_dependents_and_drop_refusal(store: CatalogStore) -> None:
    _pipeline(store)
    assert store.dependents("view", "v") == [("sink", "s1"), ("sink", "s2")]
    assert store.dependents("sink", "s1") == []
    with pytest.raises(DependentObjectsError) as info:
        store.drop_object("view", "v")
    assert info.value.dependents == [("sink", "s1"), ("sink", "s2")]
    assert info.value.message == 'cannot drop view "v": sink "s1", sink "s2" depend on it'
    assert info.value.hint and "CASCADE" in info.value.hint
    with pytest.raises(DependentObjectsError) as secret_info:
        store.drop_object("secret", "pw")
    assert secret_info.value.dependents == [("connection", "cat")]
    assert len(store.list_objects()) == 6  # nothing dropped
    with pytest.raises(ObjectNotFoundError):
        store.dependents("view", "nope")


def test_drop_cascade_deepest_first(store: CatalogStore) -> None:
    _pipeline(store)
    dropped = store.drop_object("source", "events", cascade=True)
    assert dropped[-1] == ("source", "events")
    assert dropped.index(("sink", "s1")) < dropped.index(("view", "v"))
    assert dropped.index(("sink", "s2")) < dropped.index(("view", "v"))
    assert sorted(dropped) == [("sink", "s1"), ("sink", "s2"), ("source", "events"), ("view", "v")]
    assert [(o.kind, o.name) for o in store.list_objects()] == [("connection", "cat"), ("secret", "pw")]
    assert store.get_sink_state("s1") is None
    assert store.dependents("connection", "cat") == []
    # The secret is free to go now that its only user ... is still there: the connection.
    with pytest.raises(DependentObjectsError):
        store.drop_object("secret", "pw")
    assert store.drop_object("secret", "pw", cascade=True) == [("connection", "cat"), ("secret", "pw")]
    assert store.list_objects() == []


def test_drop_cascade_diamond(store: CatalogStore) -> None:
    store.create_object("source", "a", "s", {})
    store.create_object("view", "b", "v", {}, [("source", "a")])
    store.create_object("view", "c", "v", {}, [("source", "a"), ("view", "b")])
    store.create_object("sink", "d", "k", {}, [("view", "b"), ("view", "c")])
    dropped = store.drop_object("source", "a", cascade=True)
    assert dropped == [("sink", "d"), ("view", "c"), ("view", "b"), ("source", "a")]


def test_drop_without_dependents_and_if_exists(store: CatalogStore) -> None:
    store.create_object("source", "a", "s", {})
    assert store.drop_object("source", "a") == [("source", "a")]
    assert store.drop_object("source", "a", if_exists=True) == []
    with pytest.raises(ObjectNotFoundError) as info:
        store.drop_object("source", "a")
    assert info.value.message == 'source "a" does not exist'


def test_drop_failure_inside_cascade_rolls_back(store: CatalogStore) -> None:
    _pipeline(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.drop_object("source", "events", cascade=True)
        raise RuntimeError("boom")
    assert len(store.list_objects()) == 6


def test_replace_object_keeps_identity(store: CatalogStore) -> None:
    _pipeline(store)
    before = store.get_object("sink", "s1")
    assert before is not None
    store.bump_sink_version("s1")
    store.replace_object("sink", "s1", "ALTER'd", {"mode": "append", "max_period": "1m"}, [("view", "v")])
    after = store.get_object("sink", "s1")
    assert after is not None
    assert after.object_id == before.object_id and after.created_at == before.created_at
    assert after.updated_at >= before.updated_at
    assert (after.sql, after.definition, after.dependencies) == (
        "ALTER'd",
        {"mode": "append", "max_period": "1m"},
        (("view", "v"),),
    )
    assert store.dependents("connection", "cat") == []
    assert store.get_sink_state("s1").version == 1  # type: ignore[union-attr]
    with pytest.raises(ObjectNotFoundError):
        store.replace_object("sink", "nope", "x", {})
    with pytest.raises(ObjectNotFoundError):
        store.replace_object("sink", "s1", "x", {}, [("view", "missing")])
    assert store.get_object("sink", "s1") == after  # the failed ALTER changed nothing


def test_replace_refuses_cycles(store: CatalogStore) -> None:
    store.create_object("view", "a", "v", {})
    store.create_object("view", "b", "v", {}, [("view", "a")])
    store.create_object("view", "c", "v", {}, [("view", "b")])
    with pytest.raises(StoreError, match="already depends on"):
        store.replace_object("view", "a", "v", {}, [("view", "c")])
    with pytest.raises(StoreError, match="itself"):
        store.replace_object("view", "a", "v", {}, [("view", "a")])


def test_invalid_input(store: CatalogStore) -> None:
    with pytest.raises(StoreError, match="unknown object kind"):
        store.create_object("table", "t", "x", {})
    with pytest.raises(StoreError, match="create_secret"):
        store.create_object("secret", "s", "x", {})
    with pytest.raises(StoreError, match="non-empty"):
        store.create_object("source", "", "x", {})
    with pytest.raises(StoreError, match="JSON"):
        store.create_object("source", "s", "x", {"bad": object()})
    with pytest.raises(StoreError, match="pair"):
        store.create_object("source", "s", "x", {}, ["oops"])  # type: ignore[list-item]
    assert store.list_objects() == []


def test_enum_kinds_accepted(store: CatalogStore) -> None:
    class Kind(str, enum.Enum):
        SOURCE = "source"
        VIEW = "view"

    store.create_object(Kind.SOURCE, "a", "s", {})
    store.create_object(Kind.VIEW, "b", "v", {}, [(Kind.SOURCE, "a")])
    obj = store.get_object(Kind.VIEW, "b")
    assert obj is not None and obj.kind == "view" and obj.dependencies == (("source", "a"),)


def test_transaction_groups_changes(store: CatalogStore) -> None:
    with store.transaction():
        store.create_object("source", "a", "s", {})
        with pytest.raises(ObjectExistsError):  # the inner failure rolls back only its savepoint
            store.create_object("view", "a", "v", {})
        store.create_object("view", "b", "v", {}, [("source", "a")])
    assert [o.name for o in store.list_objects()] == ["a", "b"]
    with pytest.raises(ValueError), store.transaction():
        store.create_object("source", "c", "s", {})
        raise ValueError
    assert store.get_object("source", "c") is None


def test_reopen_persists(store_path: object) -> None:
    with CatalogStore(store_path) as first:  # type: ignore[arg-type]
        first.create_object("source", "a", "s", {"k": "v"})
        object_id = first.get_object("source", "a").object_id  # type: ignore[union-attr]
    with CatalogStore(store_path) as second:  # type: ignore[arg-type]
        obj = second.get_object("source", "a")
        assert obj is not None and obj.object_id == object_id and obj.definition == {"k": "v"}


def test_closed_store_raises(store_path: object) -> None:
    s = CatalogStore(store_path)  # type: ignore[arg-type]
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.list_objects()


def test_memory_store() -> None:
    with CatalogStore(":memory:") as s:
        s.create_object("source", "a", "s", {})
        assert s.get_object("source", "a") is not None


def test_not_found_hints_at_the_kind_that_holds_the_name(store: CatalogStore) -> None:
    store.create_object("source", "events", "s", {})
    with pytest.raises(ObjectNotFoundError) as info:
        store.drop_object("view", "events")
    assert info.value.hint == '"events" is a source'


def test_store_refuses_use_after_fork(store: CatalogStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    real = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: real + 1)
    with pytest.raises(StoreError, match="another process"):
        store.list_objects()

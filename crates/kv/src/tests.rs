//! One conformance suite, run against every backend, and the failure modes of each.

use std::time::Duration;

use bytes::Bytes;
use edgegate_testkit::redis::RedisServer;

use crate::*;

fn b(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}

fn keys(list: &[Bytes]) -> Vec<&[u8]> {
    list.iter().map(|k| &k[..]).collect()
}

/// What every backend must do the same way.
async fn conformance<B: Backend>(store: &B) {
    // get / put / overwrite / delete
    assert_eq!(store.get(b"missing").await.unwrap(), None);
    store.put(b"k", b"v1", None).await.unwrap();
    assert_eq!(store.get(b"k").await.unwrap(), b("v1"));
    store.put(b"k", b"v2", None).await.unwrap();
    assert_eq!(store.get(b"k").await.unwrap(), b("v2"));
    assert!(store.delete(b"k").await.unwrap());
    assert!(!store.delete(b"k").await.unwrap());
    assert_eq!(store.get(b"k").await.unwrap(), None);

    // Keys and values are bytes, not text and not paths.
    let odd_key: &[u8] = b"../../etc/passwd\0\xff*?[x]";
    store.put(odd_key, b"\x00\x01\xfe", None).await.unwrap();
    assert_eq!(store.get(odd_key).await.unwrap().as_deref(), Some(&b"\x00\x01\xfe"[..]));
    store.put(b"empty", b"", None).await.unwrap();
    assert_eq!(store.get(b"empty").await.unwrap(), b(""), "an empty value is not a missing one");

    // batches
    store.put_many(&[(b"b/1", b"one"), (b"b/2", b"two"), (b"b/3", b"three")], None).await.unwrap();
    let got = store.get_many(&[b"b/2", b"nope", b"b/1"]).await.unwrap();
    assert_eq!(got, vec![b("two"), None, b("one")]);
    assert_eq!(store.get_many(&[]).await.unwrap(), vec![]);
    store.put_many(&[], None).await.unwrap();

    // list: by prefix, in order, after a key, limited
    store.put(b"b/0", b"zero", None).await.unwrap();
    store.put(b"c/1", b"other prefix", None).await.unwrap();
    let all = store.list(b"b/", b"", 100).await.unwrap();
    assert_eq!(keys(&all), [&b"b/0"[..], b"b/1", b"b/2", b"b/3"]);
    let page = store.list(b"b/", b"", 2).await.unwrap();
    assert_eq!(keys(&page), [&b"b/0"[..], b"b/1"]);
    let next = store.list(b"b/", &page[1], 2).await.unwrap();
    assert_eq!(keys(&next), [&b"b/2"[..], b"b/3"]);
    assert!(store.list(b"b/", b"b/3", 2).await.unwrap().is_empty());
    assert!(store.list(b"zzz", b"", 10).await.unwrap().is_empty());
    // A glob character in a prefix is a plain byte.
    assert!(store.list(b"b*", b"", 10).await.unwrap().is_empty());

    // incr: missing is 0, negative deltas, text that is not a number, overflow
    assert_eq!(store.incr(b"n", 5, None).await.unwrap(), 5);
    assert_eq!(store.incr(b"n", -7, None).await.unwrap(), -2);
    assert_eq!(store.get(b"n").await.unwrap(), b("-2"), "counters are decimal text");
    store.put(b"n", b"40", None).await.unwrap();
    assert_eq!(store.incr(b"n", 2, None).await.unwrap(), 42);
    assert_eq!(store.incr(b"b/1", 1, None).await, Err(KvError::NotAnInteger));
    assert_eq!(store.get(b"b/1").await.unwrap(), b("one"), "a failed incr changes nothing");
    store.put(b"max", i64::MAX.to_string().as_bytes(), None).await.unwrap();
    assert_eq!(store.incr(b"max", 1, None).await, Err(KvError::NotAnInteger));

    // TTLs: an expired entry is gone for every operation.
    store.put(b"t/short", b"x", Some(Duration::from_millis(150))).await.unwrap();
    store.put_many(&[(b"t/batch", b"y")], Some(Duration::from_millis(150))).await.unwrap();
    store.put(b"t/long", b"z", Some(Duration::from_secs(600))).await.unwrap();
    assert_eq!(store.incr(b"t/window", 1, Some(Duration::from_millis(150))).await.unwrap(), 1);
    assert_eq!(store.incr(b"t/window", 1, Some(Duration::from_secs(600))).await.unwrap(), 2);
    assert_eq!(store.get(b"t/short").await.unwrap(), b("x"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(store.get(b"t/short").await.unwrap(), None);
    assert_eq!(store.get_many(&[b"t/batch", b"t/long"]).await.unwrap(), vec![None, b("z")]);
    assert_eq!(keys(&store.list(b"t/", b"", 10).await.unwrap()), [&b"t/long"[..]]);
    assert_eq!(
        store.incr(b"t/window", 1, Some(Duration::from_secs(600))).await.unwrap(),
        1,
        "the window's first TTL held, so the counter started again"
    );
    assert!(!store.delete(b"t/short").await.unwrap(), "an expired key did not exist");
}

#[tokio::test]
async fn memory_conforms() {
    conformance(&MemoryStore::new(1 << 20)).await;
}

#[tokio::test]
async fn memory_as_a_store_conforms() {
    conformance(&Store::Memory(std::sync::Arc::new(MemoryStore::new(1 << 20)))).await;
}

#[tokio::test]
async fn redb_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let db = DiskStore::open(&dir.path().join("kv.redb")).unwrap();
    conformance(&DiskStore::namespace(db.clone(), "a").unwrap()).await;
    // Namespaces sharing a file do not see each other's keys.
    let other = DiskStore::namespace(db, "b").unwrap();
    assert_eq!(other.get(b"n").await.unwrap(), None);
}

fn redis_store(server: &RedisServer, prefix: &str, timeout: Duration) -> RedisStore {
    RedisStore::new(RedisSettings {
        url: server.url(),
        timeout,
        prefix: prefix.as_bytes().to_vec(),
    })
    .unwrap()
}

#[tokio::test]
async fn redis_conforms() {
    let Some(server) = RedisServer::start("redis_conforms") else { return };
    let store = redis_store(&server, "edgegate:a:", Duration::from_secs(2));
    conformance(&store).await;
    let other = redis_store(&server, "edgegate:b:", Duration::from_secs(2));
    assert_eq!(other.get(b"n").await.unwrap(), None, "prefixes keep namespaces apart");
}

#[tokio::test]
async fn memory_capacity_is_enforced_and_loses_nothing() {
    let store = MemoryStore::new(100);
    store.put(b"a", &[1; 60], None).await.unwrap();
    assert_eq!(store.used(), 61);
    let full = KvError::Full { capacity: 100 };
    assert_eq!(store.put(b"b", &[2; 60], None).await, Err(full.clone()));
    assert_eq!(store.put_many(&[(b"c", b"1"), (b"d", &[3; 60])], None).await, Err(full));
    assert_eq!(store.get(b"c").await.unwrap(), None, "a refused batch stores nothing");
    // Overwriting with something smaller frees the difference.
    store.put(b"a", &[1; 10], None).await.unwrap();
    assert_eq!(store.used(), 11);
    store.put(b"b", &[2; 60], None).await.unwrap();
    assert!(store.delete(b"a").await.unwrap());
    assert_eq!(store.used(), 61);
    store.incr(b"n", 12345, None).await.unwrap();
    assert_eq!(store.used(), 61 + 1 + 5);
}

#[tokio::test]
async fn memory_purges_expired_entries() {
    let store = MemoryStore::new(1 << 20);
    store.put(b"gone", b"x", Some(Duration::from_millis(10))).await.unwrap();
    store.put(b"kept", b"y", None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(store.purge_expired(), 1);
    assert_eq!(store.used(), 5);
}

#[tokio::test]
async fn redb_writes_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv.redb");
    {
        let db = DiskStore::open(&path).unwrap();
        let store = DiskStore::namespace(db, "ns").unwrap();
        store.put(b"k", b"durable", None).await.unwrap();
        store.put(b"t", b"expiring", Some(Duration::from_secs(600))).await.unwrap();
    }
    let db = DiskStore::open(&path).unwrap();
    let store = DiskStore::namespace(db, "ns").unwrap();
    assert_eq!(store.get_many(&[b"k", b"t"]).await.unwrap(), vec![b("durable"), b("expiring")]);
}

#[tokio::test]
async fn redis_down_at_start_fails_fast_then_works_once_it_is_up() {
    let Some(probe) = RedisServer::start("redis_down_at_start") else { return };
    let port = probe.port();
    probe.kill();
    let store = RedisStore::new(RedisSettings {
        url: format!("redis://127.0.0.1:{port}"),
        timeout: Duration::from_millis(300),
        prefix: b"p:".to_vec(),
    })
    .unwrap();
    let started = std::time::Instant::now();
    let error = store.get(b"k").await.unwrap_err();
    assert!(matches!(error, KvError::Unavailable(_) | KvError::Timeout(_)), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "bounded: {:?}", started.elapsed());
    let _server = RedisServer::start_on(port).unwrap();
    recovered(&store).await;
}

/// Waits (up to 10 s) until the store answers again.
async fn recovered(store: &RedisStore) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match store.put(b"k", b"back", None).await {
            Ok(()) => break,
            Err(e) if std::time::Instant::now() < deadline => {
                assert!(matches!(e, KvError::Unavailable(_) | KvError::Timeout(_)), "{e:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no recovery after 10 s: {e}"),
        }
    }
    assert_eq!(store.get(b"k").await.unwrap(), b("back"));
}

#[tokio::test]
async fn redis_restart_mid_run_errors_during_the_outage_and_recovers() {
    let Some(server) = RedisServer::start("redis_restart_mid_run") else { return };
    let port = server.port();
    let store = redis_store(&server, "p:", Duration::from_millis(300));
    store.put(b"before", b"1", None).await.unwrap();
    server.kill();

    for _ in 0..3 {
        let started = std::time::Instant::now();
        let error = store.get(b"before").await.unwrap_err();
        assert!(matches!(error, KvError::Unavailable(_) | KvError::Timeout(_)), "{error:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "bounded: {:?}", started.elapsed());
    }

    // A new server with no data: the writes after the restart work, the old data is gone
    // (this test server keeps nothing on disk).
    let _server = RedisServer::start_on(port).unwrap();
    recovered(&store).await;
    assert_eq!(store.get(b"before").await.unwrap(), None);
}

#[tokio::test]
async fn a_hanging_redis_times_out() {
    // A server that accepts and never answers: the call must end at the timeout.
    let port = edgegate_testkit::redis::silent_server();
    let store = RedisStore::new(RedisSettings {
        url: format!("redis://127.0.0.1:{port}"),
        timeout: Duration::from_millis(200),
        prefix: Vec::new(),
    })
    .unwrap();
    let started = std::time::Instant::now();
    let error = store.get(b"k").await.unwrap_err();
    assert!(matches!(error, KvError::Timeout(_) | KvError::Unavailable(_)), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
}

#[tokio::test]
async fn redis_gcra_lets_a_burst_through_then_one_per_interval_and_forgets_idle_keys() {
    let Some(server) = RedisServer::start("redis_gcra") else { return };
    let store = redis_store(&server, "rate:", Duration::from_secs(2));
    // A first call after `SCRIPT FLUSH` loads the script again (`NOSCRIPT`, then `EVALSHA`).
    store.gcra(b"warm", Duration::from_secs(1), 1).await.unwrap();
    let flush = |mut c: redis::aio::ConnectionManager| async move {
        redis::cmd("SCRIPT").arg("FLUSH").query_async::<()>(&mut c).await
    };
    store.call(flush).await.unwrap();
    // 3 at once, then refused until one interval (10 s here, so the test cannot race it).
    let interval = Duration::from_secs(10);
    let mut answers = Vec::new();
    for _ in 0..4 {
        answers.push(store.gcra(b"k", interval, 3).await.unwrap());
    }
    let remaining: Vec<u32> = answers[..3]
        .iter()
        .map(|a| match a {
            Gcra::Allowed { remaining, reset } => {
                assert!(*reset > Duration::ZERO && *reset <= interval * 3, "{a:?}");
                *remaining
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(remaining, [2, 1, 0]);
    let Gcra::Limited { retry_after } = answers[3] else { panic!("{answers:?}") };
    assert!(retry_after > interval - Duration::from_secs(1) && retry_after <= interval);
    // Another key has its own count.
    assert!(matches!(store.gcra(b"j", interval, 3).await.unwrap(), Gcra::Allowed { .. }));
    // The key expires when it would be back to full: here in at most 30 s.
    let pttl = |mut c: redis::aio::ConnectionManager| async move {
        redis::cmd("PTTL").arg("rate:k").query_async::<i64>(&mut c).await
    };
    let left = store.call(pttl).await.unwrap();
    assert!(left > 20_000 && left <= 30_000, "PTTL {left}");
    // A fast rate: after its interval a refused key passes again.
    let fast = Duration::from_millis(20);
    assert!(matches!(store.gcra(b"f", fast, 1).await.unwrap(), Gcra::Allowed { remaining: 0, .. }));
    assert!(matches!(store.gcra(b"f", fast, 1).await.unwrap(), Gcra::Limited { .. }));
    tokio::time::sleep(fast * 2).await;
    assert!(matches!(store.gcra(b"f", fast, 1).await.unwrap(), Gcra::Allowed { .. }));
}

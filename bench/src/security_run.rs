//! `tidelog bench --security`: what TLS, SCRAM logins and ACLs cost at the
//! table's load, beside plaintext in the same run (the security issue's
//! goals: SASL_SSL and HTTPS at least 70 % of plaintext records/s, a
//! login's server CPU reported, 10,000 ACLs costing under 5 % of produce).
//!
//! `--protocol kafka` starts two servers, each a child process with
//! `--server-config` under it:
//! * `open`: a PLAINTEXT and a SASL_SSL Kafka listener (TLS over the
//!   bench's own certificate, SCRAM-SHA-512 as user `bench`),
//!   authorization off;
//! * `acls`: the same with `security.authorization` on and 10,000 ACLs,
//!   created through Kafka's CreateAcls as the super user: 9,998 of 100
//!   other principals on other topics (literal and prefixed), and the
//!   load user's WRITE and READ on the bench topic.
//!
//! Then, in alternating slices as every run: produce to `plaintext`
//! (open's PLAINTEXT listener), `sasl-ssl` (open's SASL_SSL listener) and
//! `sasl-ssl-acls` (acls' SASL_SSL listener); fetch from `plaintext` and
//! `sasl-ssl`; and the login phase: connections made one after another
//! to open's SASL_SSL listener, each a TCP connect, a TLS handshake and a
//! SCRAM login, timed, with the server's CPU per login.
//!
//! `--protocol http` starts `http` (plain) and `https` (`http.tls`, the
//! same certificate), otherwise alike, and produces to and fetches from
//! both in alternating slices.
//!
//! The load connections are made, and log in, before each slice's
//! clock starts (`load.rs`), so the phases measure encrypted traffic and
//! the login phase measures logins.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use bytes::Bytes;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::admin::{cluster_id, ensure_topic, partition_ranges};
use crate::body::produce_body;
use crate::client::{self, Conn};
use crate::cpu::{CpuSource, CLIENT_THREAD_NAME};
use crate::histogram::Histogram;
use crate::kafka_client::{self, KafkaConn};
use crate::kafka_run;
use crate::load::{alternate_all, Job, Target};
use crate::machine::ServerFigures;
use crate::measured::PhaseResult;
use crate::render::{ms, ratio, server_micros, table, verdict, CPU_HEADING};
use crate::results::{PhaseFigures, RunResults};
use crate::secure::{self, BenchPki, Login, Secure, ADMIN_USER, LOAD_USER};
use crate::target::{free_local_addr, ChildServer};
use crate::{BenchArgs, Protocol};

/// Goal: the secured listener's records/s at least this share of the
/// plain one's (SASL_SSL against PLAINTEXT, HTTPS against HTTP).
const SECURED_GOAL: f64 = 0.70;
/// Goal: produce with [`ACLS`] ACLs at least this share of produce with
/// authorization off (under 5 % cost).
const ACLS_GOAL: f64 = 0.95;
/// ACLs the `acls` server holds.
const ACLS: usize = 10_000;
/// CreateAcls requests carry this many creations each.
const ACLS_PER_REQUEST: usize = 1_000;
/// Other principals the ACLs name.
const OTHER_PRINCIPALS: usize = 100;
/// The login phase's time bound (its count is `--logins`).
const LOGINS_TIME_MAX: Duration = Duration::from_secs(20);
/// Logins before the measured ones (this VM's memory goes cold).
const LOGINS_WARMUP: usize = 10;
/// Started servers' ready wait.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The whole `--security` run.
pub(crate) async fn run(args: &BenchArgs, topic: &str) -> anyhow::Result<RunResults> {
    let dir = match &args.data_dir {
        Some(parent) => tempfile::Builder::new()
            .prefix("tidelog-bench-pki-")
            .tempdir_in(parent),
        None => tempfile::Builder::new()
            .prefix("tidelog-bench-pki-")
            .tempdir(),
    }
    .context("creating the certificates' temporary dir")?;
    let pki = BenchPki::create(dir.path())?;
    let password = format!("bench-{}", std::process::id());
    let password_file = dir.path().join("bench.password");
    secure::write_private(&password_file, password.as_bytes())?;
    let setup = Setup {
        pki,
        password,
        password_file,
        admin_token: format!("tidelog-bench-admin-token-{}", std::process::id()),
    };
    println!(
        "security: TLS with the bench's own CA (ECDSA P-256 server key), SCRAM-SHA-512 logins"
    );
    match args.protocol {
        Protocol::Kafka => kafka(args, topic, &setup).await,
        Protocol::Http => http(args, topic, &setup).await,
    }
}

/// What the servers and the clients of one run share.
struct Setup {
    pki: BenchPki,
    password: String,
    password_file: std::path::PathBuf,
    admin_token: String,
}

impl Setup {
    fn login(&self, user: &str) -> Login {
        Login {
            user: user.to_owned(),
            password: self.password.clone(),
        }
    }

    /// `tls:` naming the bench's certificate.
    fn tls(&self) -> serde_json::Value {
        serde_json::json!({
            "cert_file": self.pki.cert_file,
            "key_file": self.pki.key_file,
        })
    }
}

/// A started server of this run and its Kafka listeners' addresses.
struct Started {
    server: ChildServer,
    plain: Option<SocketAddr>,
    secure: Option<SocketAddr>,
}

impl Started {
    fn cpu(&self) -> CpuSource {
        CpuSource::Process(self.server.child.id())
    }
}

/// A server with a PLAINTEXT and a SASL_SSL listener, `authorization` on
/// or off, ready.
async fn start_kafka(
    args: &BenchArgs,
    setup: &Setup,
    authorization: bool,
) -> anyhow::Result<Started> {
    let (plain, secure) = (free_local_addr()?, free_local_addr()?);
    let user = |name: &str| serde_json::json!({"name": name, "password_file": setup.password_file});
    let overlay = serde_json::json!({
        "tls": setup.tls(),
        "admin_token": setup.admin_token,
        "kafka": {"listeners": [
            {"name": "PLAIN", "listen": plain.to_string(), "security_protocol": "PLAINTEXT"},
            {"name": "SECURE", "listen": secure.to_string(), "security_protocol": "SASL_SSL"},
        ]},
        "security": {
            "authorization": authorization,
            "super_users": [ADMIN_USER],
            "users": [user(LOAD_USER), user(ADMIN_USER)],
        },
    });
    let server = start(args, &overlay, None).await?;
    Ok(Started {
        server,
        plain: Some(plain),
        secure: Some(secure),
    })
}

/// A child server with `overlay` over its config, ready (over TLS when
/// `secure`).
async fn start(
    args: &BenchArgs,
    overlay: &serde_json::Value,
    secure: Option<&Secure>,
) -> anyhow::Result<ChildServer> {
    let overlay: serde_yaml::Mapping =
        serde_yaml::to_value(overlay).and_then(serde_yaml::from_value)?;
    let mut server = ChildServer::start_with(args, Some(&overlay))?;
    let ready =
        client::wait_ready_secure(server.addr, secure, READY_TIMEOUT, || server.check_alive())
            .await;
    if let Err(e) = ready {
        return Err(e.context(format!(
            "--- server log ---\n{}",
            std::fs::read_to_string(&server.log_path).unwrap_or_default()
        )));
    }
    Ok(server)
}

async fn kafka(args: &BenchArgs, topic: &str, setup: &Setup) -> anyhow::Result<RunResults> {
    let open = start_kafka(args, setup, false).await?;
    let acls = start_kafka(args, setup, true).await?;
    let (Some(open_plain), Some(open_secure), Some(acls_secure)) =
        (open.plain, open.secure, acls.secure)
    else {
        anyhow::bail!("a started server without its listeners");
    };
    for (name, s) in [("open", &open), ("acls", &acls)] {
        println!(
            "{name}: http://{} (child process {}), PLAINTEXT {}, SASL_SSL {}{}",
            s.server.addr,
            s.server.child.id(),
            s.plain.map_or_else(String::new, |a| a.to_string()),
            s.secure.map_or_else(String::new, |a| a.to_string()),
            if name == "acls" {
                format!(", authorization on, {ACLS} ACLs")
            } else {
                ", authorization off".to_owned()
            }
        );
    }
    // Both servers have an admin token: topics are an admin's to create.
    let bearer = Secure::bearer_only(&setup.admin_token);
    let mut open_admin = Conn::connect_secure(open.server.addr, Some(&bearer)).await?;
    let cluster = cluster_id(&mut open_admin).await?;
    let partitions = ensure_topic(&mut open_admin, &cluster, topic, args.partitions).await?;
    let mut acls_admin = Conn::connect_secure(acls.server.addr, Some(&bearer)).await?;
    let acls_cluster = cluster_id(&mut acls_admin).await?;
    ensure_topic(&mut acls_admin, &acls_cluster, topic, args.partitions).await?;
    let admin = Secure::new(&setup.pki, Some(setup.login(ADMIN_USER)))?;
    create_acls(acls_secure, &admin, topic).await?;
    println!(
        "topic: {topic} ({partitions} partitions) on both, acks {}",
        args.acks
    );

    let load = Arc::new(Secure::new(&setup.pki, Some(setup.login(LOAD_USER)))?);
    let plaintext = Target::plain(open_plain, open.cpu());
    let sasl_ssl = Target::secured(open_secure, open.cpu(), Arc::clone(&load));
    let with_acls = Target::secured(acls_secure, acls.cpu(), Arc::clone(&load));

    let produce = kafka_run::produce_job(args, topic, partitions)?;
    let produced = alternate_all(
        "produce",
        &[
            ("plaintext", &plaintext, &produce),
            ("sasl-ssl", &sasl_ssl, &produce),
            ("sasl-ssl-acls", &with_acls, &produce),
        ],
        args,
    )
    .await?;

    let ranges = partition_ranges(open.server.addr, Some(&bearer), topic, partitions).await?;
    let fetch = kafka_run::fetch_job(args, topic, ranges);
    let fetched = alternate_all(
        "fetch",
        &[
            ("plaintext", &plaintext, &fetch),
            ("sasl-ssl", &sasl_ssl, &fetch),
        ],
        args,
    )
    .await?;
    // On the client runtime's threads, whose CPU is the load generator's
    // (the run itself is on the main thread).
    let login_secure = Arc::clone(&load);
    let open_cpu = open.cpu();
    let count = args.logins;
    let logins =
        tokio::spawn(
            async move { measure_logins(open_secure, open_cpu, &login_secure, count).await },
        )
        .await
        .context("the login phase panicked")??;

    report_kafka(args, &produced, &fetched, &logins);
    let mut results = RunResults::for_args("kafka-security", args);
    results.acks = Some(args.acks);
    let produce_targets = ["plaintext", "sasl-ssl", "sasl-ssl-acls"];
    results.phases = (produced.iter().zip(produce_targets))
        .map(|(r, target)| PhaseFigures::of("produce", target, r))
        .chain(
            (fetched.iter().zip(produce_targets))
                .map(|(r, target)| PhaseFigures::of("fetch", target, r)),
        )
        .collect();
    logins.record(&mut results);
    results.server = Some(held(&open.server));
    Ok(results)
}

async fn http(args: &BenchArgs, topic: &str, setup: &Setup) -> anyhow::Result<RunResults> {
    let tls = Arc::new(Secure::new(&setup.pki, None)?);
    let plain = start(args, &serde_json::json!({}), None).await?;
    let https_overlay = serde_json::json!({"tls": setup.tls(), "http": {"tls": true}});
    let https = start(args, &https_overlay, Some(&tls)).await?;
    println!(
        "http: http://{} (child process {}); https: https://{} (child process {}, TLS with the bench's certificate)",
        plain.addr,
        plain.child.id(),
        https.addr,
        https.child.id()
    );
    let http_target = Target::plain(plain.addr, CpuSource::Process(plain.child.id()));
    let https_target = Target::secured(
        https.addr,
        CpuSource::Process(https.child.id()),
        Arc::clone(&tls),
    );
    let mut partitions = 0;
    for target in [&http_target, &https_target] {
        let mut admin = Conn::connect_secure(target.addr, target.secure.as_deref()).await?;
        let cluster = cluster_id(&mut admin).await?;
        partitions = ensure_topic(&mut admin, &cluster, topic, args.partitions).await?;
    }
    println!("topic: {topic} ({partitions} partitions) on both");
    let produce = Arc::new(Job::Produce {
        topic: topic.to_string(),
        partitions,
        body: Bytes::from(produce_body(args.batch, args.record_bytes)?),
    });
    let produced = alternate_all(
        "produce",
        &[
            ("http", &http_target, &produce),
            ("https", &https_target, &produce),
        ],
        args,
    )
    .await?;
    // Each server fetches what it was given.
    let mut fetches = Vec::new();
    for target in [&http_target, &https_target] {
        let secure = target.secure.as_deref();
        fetches.push(Arc::new(Job::Fetch {
            topic: topic.to_string(),
            ranges: partition_ranges(target.addr, secure, topic, partitions).await?,
            batch: args.batch,
        }));
    }
    let fetched = alternate_all(
        "fetch",
        &[
            ("http", &http_target, &fetches[0]),
            ("https", &https_target, &fetches[1]),
        ],
        args,
    )
    .await?;
    report_http(args, &produced, &fetched);
    let mut results = RunResults::for_args("http-security", args);
    let targets = ["http", "https"];
    results.phases = (produced.iter().zip(targets))
        .map(|(r, target)| PhaseFigures::of("produce", target, r))
        .chain(
            (fetched.iter().zip(targets)).map(|(r, target)| PhaseFigures::of("fetch", target, r)),
        )
        .collect();
    results.server = Some(held(&https));
    Ok(results)
}

/// What `server` holds at the end of the run, printed.
fn held(server: &ChildServer) -> ServerFigures {
    let figures = ServerFigures::read(server.child.id());
    println!("server after the run: {}", figures.describe());
    figures
}

/// [`ACLS`] ACLs on the server whose SASL_SSL listener is `addr`, through
/// CreateAcls as the super user: the load user's WRITE and READ on
/// `topic`, the rest of [`OTHER_PRINCIPALS`] other principals on other
/// topics, literal and prefixed, so the index holds many principals and
/// patterns, as a shared cluster's would.
async fn create_acls(addr: SocketAddr, admin: &Secure, topic: &str) -> anyhow::Result<()> {
    const TOPIC: i8 = 2;
    const LITERAL: i8 = 3;
    const PREFIXED: i8 = 4;
    const READ: i8 = 3;
    const WRITE: i8 = 4;
    const DESCRIBE: i8 = 8;
    const ALLOW: i8 = 3;
    const VERSION: i16 = 3;
    let acl = |principal: String, name: String, pattern: i8, operation: i8| {
        AclCreation::default()
            .with_resource_type(TOPIC)
            .with_resource_name(StrBytes::from_string(name))
            .with_resource_pattern_type(pattern)
            .with_principal(StrBytes::from_string(principal))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(operation)
            .with_permission_type(ALLOW)
    };
    let mut all = vec![
        acl(
            format!("User:{LOAD_USER}"),
            topic.to_owned(),
            LITERAL,
            WRITE,
        ),
        acl(format!("User:{LOAD_USER}"), topic.to_owned(), LITERAL, READ),
    ];
    all.extend((0..ACLS - all.len()).map(|i| {
        let principal = format!("User:other-{}", i % OTHER_PRINCIPALS);
        let name = format!("t-{}-{}", i / OTHER_PRINCIPALS, i % 7);
        let pattern = if i % 2 == 0 { LITERAL } else { PREFIXED };
        acl(principal, name, pattern, [READ, WRITE, DESCRIBE][i % 3])
    }));
    let mut conn = KafkaConn::connect_secure(addr, Some(admin)).await?;
    let started = Instant::now();
    let mut created = 0;
    for chunk in all.chunks(ACLS_PER_REQUEST) {
        let request = CreateAclsRequest::default().with_creations(chunk.to_vec());
        let frame = kafka_client::request_frame(ApiKey::CreateAcls, VERSION, &request)?;
        let answer: CreateAclsResponse =
            kafka_client::decode(conn.call(&frame).await?, ApiKey::CreateAcls, VERSION)?;
        ensure!(
            answer.results.len() == chunk.len(),
            "CreateAcls answered {} of {}",
            answer.results.len(),
            chunk.len()
        );
        if let Some(refused) = answer.results.iter().find(|r| r.error_code != 0) {
            anyhow::bail!(
                "CreateAcls refused an ACL: error {} ({})",
                refused.error_code,
                refused.error_message.as_deref().unwrap_or("")
            );
        }
        created += chunk.len();
        println!(
            "  [acls] {created} of {ACLS} created ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// What the login phase measured.
struct Logins {
    count: usize,
    latency: Histogram,
    server_cpu: Option<Duration>,
    client_cpu: Option<Duration>,
}

impl Logins {
    fn per_login(cpu: Option<Duration>, count: usize) -> Option<f64> {
        Some(cpu?.as_secs_f64() * 1e3 / count.max(1) as f64)
    }

    fn record(&self, results: &mut RunResults) {
        results.extra.insert("logins".into(), self.count as f64);
        results
            .extra
            .insert("login_p50_ms".into(), ms(self.latency.quantile(0.5)));
        if let Some(server) = Logins::per_login(self.server_cpu, self.count) {
            results.extra.insert("login_server_cpu_ms".into(), server);
        }
        if let Some(client) = Logins::per_login(self.client_cpu, self.count) {
            results.extra.insert("login_client_cpu_ms".into(), client);
        }
    }
}

/// `logins` connections one after another to `addr` (bounded by
/// [`LOGINS_TIME_MAX`]), each connected, TLS-handshaken and logged in,
/// then closed; after [`LOGINS_WARMUP`] (at most `logins`) unmeasured
/// ones.
async fn measure_logins(
    addr: SocketAddr,
    server: CpuSource,
    secure: &Secure,
    logins: usize,
) -> anyhow::Result<Logins> {
    for _ in 0..LOGINS_WARMUP.min(logins) {
        KafkaConn::connect_secure(addr, Some(secure)).await?;
    }
    let client = CpuSource::Threads(CLIENT_THREAD_NAME);
    let (server_at, client_at) = (server.cpu_time(), client.cpu_time());
    let started = Instant::now();
    let mut latency = Histogram::default();
    let mut count = 0;
    while count < logins && started.elapsed() < LOGINS_TIME_MAX {
        let at = Instant::now();
        let conn = KafkaConn::connect_secure(addr, Some(secure)).await?;
        latency.record(at.elapsed());
        drop(conn);
        count += 1;
        if count % 50 == 0 {
            println!(
                "  [logins] {count} of {logins} ({:.1} s)",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let spent =
        |at: Option<Duration>, source: CpuSource| Some(source.cpu_time()?.saturating_sub(at?));
    Ok(Logins {
        count,
        latency,
        server_cpu: spent(server_at, server),
        client_cpu: spent(client_at, client),
    })
}

/// `secured`'s records/s over `plain`'s, as a goal line.
fn goal_line(what: &str, secured: &PhaseResult, plain: &PhaseResult, goal: f64) {
    let r = ratio(secured, plain);
    println!(
        "goal {what} = {:.1} % (goal >= {:.0} %): {}",
        r * 100.0,
        goal * 100.0,
        verdict(r >= goal)
    );
}

fn report_kafka(
    args: &BenchArgs,
    produce: &[PhaseResult; 3],
    fetch: &[PhaseResult; 2],
    logins: &Logins,
) {
    let [plain, sasl, acls] = produce;
    let [fetch_plain, fetch_sasl] = fetch;
    println!();
    println!(
        "results (kafka protocol, acks {}, {} connections, {} records x {} B per produce; plaintext and sasl-ssl are one server's two listeners, sasl-ssl-acls a second server with {ACLS} ACLs):",
        args.acks, args.connections, args.batch, args.record_bytes
    );
    table(&[
        ("produce", "plaintext", plain),
        ("produce", "sasl-ssl", sasl),
        ("produce", "sasl-ssl-acls", acls),
        ("fetch", "plaintext", fetch_plain),
        ("fetch", "sasl-ssl", fetch_sasl),
    ]);
    println!();
    goal_line("produce: sasl-ssl / plaintext", sasl, plain, SECURED_GOAL);
    goal_line(
        "fetch: sasl-ssl / plaintext",
        fetch_sasl,
        fetch_plain,
        SECURED_GOAL,
    );
    goal_line(
        &format!("produce: {ACLS} ACLs / authorization off (both sasl-ssl)"),
        acls,
        sasl,
        ACLS_GOAL,
    );
    let cpu = |d: Option<Duration>| {
        Logins::per_login(d, logins.count)
            .map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2} ms"))
    };
    println!(
        "logins: {} connections, each TCP + TLS handshake + SCRAM-SHA-512: p50 {:.2} ms, p99 {:.2} ms; server CPU {} a login, load generator CPU {} a login",
        logins.count,
        ms(logins.latency.quantile(0.5)),
        ms(logins.latency.quantile(0.99)),
        cpu(logins.server_cpu),
        cpu(logins.client_cpu)
    );
    println!();
    println!("{CPU_HEADING}");
    println!(
        "produce  server: plaintext {}, sasl-ssl {}, sasl-ssl-acls {}",
        server_micros(plain),
        server_micros(sasl),
        server_micros(acls)
    );
    println!(
        "fetch    server: plaintext {}, sasl-ssl {}",
        server_micros(fetch_plain),
        server_micros(fetch_sasl)
    );
}

fn report_http(args: &BenchArgs, produce: &[PhaseResult; 2], fetch: &[PhaseResult; 2]) {
    let [plain, tls] = produce;
    let [fetch_plain, fetch_tls] = fetch;
    println!();
    println!(
        "results (HTTP, {} connections, {} records x {} B per produce, fetches of {} records; http and https are two servers alike but for http.tls):",
        args.connections, args.batch, args.record_bytes, args.batch
    );
    table(&[
        ("produce", "http", plain),
        ("produce", "https", tls),
        ("fetch", "http", fetch_plain),
        ("fetch", "https", fetch_tls),
    ]);
    println!();
    goal_line("produce: https / http", tls, plain, SECURED_GOAL);
    goal_line("fetch: https / http", fetch_tls, fetch_plain, SECURED_GOAL);
    println!();
    println!("{CPU_HEADING}");
    println!(
        "produce  server: http {}, https {}",
        server_micros(plain),
        server_micros(tls)
    );
    println!(
        "fetch    server: http {}, https {}",
        server_micros(fetch_plain),
        server_micros(fetch_tls)
    );
}

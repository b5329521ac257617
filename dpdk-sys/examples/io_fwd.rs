//! io-forward loop: rx a burst on port 0, tx it on port 1, and back, for `--seconds` seconds,
//! then print one JSON line with the packets forwarded and the rate. The Rust counterpart of
//! `dpdk-testpmd --forward-mode=io` with one forwarding core, for comparing the binding's cost.
//!
//! ```text
//! cargo run --release -p dpdk-sys --example io_fwd -- --seconds 10 [-- EAL args...]
//! ```
//! Without EAL arguments it runs on lcore 1 with two `net_null` ports and no hugepages.

use std::sync::Arc;

use anyhow::{Context, bail};
use dpdk_sys::{Burst, Eal, Mempool, MempoolConfig, Port, PortConfig, tsc};

const DEFAULT_EAL: &[&str] = &[
    "-l",
    "1",
    "--no-huge",
    "-m",
    "512",
    "--no-pci",
    "--no-shconf",
    "--no-telemetry",
    "--vdev=net_null0",
    "--vdev=net_null1",
];

fn main() -> anyhow::Result<()> {
    let mut seconds = 5u64;
    let mut eal_args: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .context("--seconds needs a value")?
                    .parse()
                    .context("--seconds takes whole seconds")?;
            }
            "--" => eal_args.extend(args.by_ref()),
            other => bail!("unknown argument {other:?}; usage: io_fwd [--seconds N] [-- EAL args]"),
        }
    }
    if eal_args.is_empty() {
        eal_args = DEFAULT_EAL.iter().map(|s| s.to_string()).collect();
    }

    let eal = Eal::init(&eal_args)?;
    if Port::count(&eal) < 2 {
        bail!("need two ports, EAL found {}", Port::count(&eal));
    }
    let pool = Arc::new(Mempool::new(
        &eal,
        &MempoolConfig {
            socket: dpdk_sys::socket_id(),
            ..MempoolConfig::new("io_fwd", 16384)
        },
    )?);
    let config = PortConfig::default();
    let mut ports = [Port::open_id(&eal, 0)?, Port::open_id(&eal, 1)?];
    for port in &mut ports {
        port.configure(&config, &pool)?;
        port.start()?;
        port.reset_stats()?;
    }
    let (mut rx0, mut tx0) = (ports[0].rx_queue(0)?, ports[0].tx_queue(0)?);
    let (mut rx1, mut tx1) = (ports[1].rx_queue(0)?, ports[1].tx_queue(0)?);

    let hz = eal.tsc_hz();
    let start = tsc();
    let deadline = start + seconds * hz;
    let mut burst: Burst<32> = Burst::new();
    let (mut forwarded, mut dropped) = (0u64, 0u64);
    let mut iterations = 0u64;
    loop {
        for (rx, tx) in [(&mut rx0, &mut tx1), (&mut rx1, &mut tx0)] {
            if rx.rx(&mut burst) > 0 {
                let count = tx.tx(&mut burst);
                forwarded += count.sent as u64;
                dropped += count.dropped as u64;
            }
        }
        iterations += 1;
        if iterations & 1023 == 0 && tsc() >= deadline {
            break;
        }
    }
    let elapsed = (tsc() - start) as f64 / hz as f64;
    drop((rx0, tx0, rx1, tx1));
    let stats = [ports[0].stats()?, ports[1].stats()?];
    println!(
        "{{\"tool\":\"io_fwd\",\"packets_forwarded\":{forwarded},\"packets_dropped\":{dropped},\
         \"seconds\":{elapsed:.3},\"pps\":{:.0},\"port0_ipackets\":{},\"port1_ipackets\":{},\
         \"rx_nombuf\":{}}}",
        forwarded as f64 / elapsed,
        stats[0].ipackets,
        stats[1].ipackets,
        stats[0].rx_nombuf + stats[1].rx_nombuf,
    );
    Ok(())
}

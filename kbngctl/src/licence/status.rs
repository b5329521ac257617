//! `kbngctl licence status`: the cap the running control enforces, where it comes from
//! (a verified licence or the free baseline, and why), its validity and how much of it is used.

use std::process::ExitCode;

use serde_json::Value;

use crate::client::{Client, Output, ServerArgs, block_on};

pub fn run(server: &ServerArgs, output: Output) -> anyhow::Result<ExitCode> {
    let c = Client::new(server)?;
    block_on(async move {
        let v = c.get("/v1/status").await?;
        let l = &v["licence"];
        let used = &v["sessions"];
        if output == Output::Json {
            let out = serde_json::json!({ "licence": l, "sessions": used });
            println!("{}", serde_json::to_string_pretty(&out)?);
            return Ok(ExitCode::SUCCESS);
        }
        let text = |v: &Value| match v {
            Value::Null => "-".to_string(),
            Value::String(s) if s.is_empty() => "-".to_string(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        println!("cap:            {}", text(&l["cap"]));
        println!("source:         {}", text(&l["source"]));
        println!("valid:          {}", text(&l["valid"]));
        println!("reason:         {}", text(&l["reason"]));
        println!("message:        {}", text(&l["message"]));
        println!("licence id:     {}", text(&l["licenceId"]));
        println!("expires:        {}", text(&l["expires"]));
        println!("days remaining: {}", text(&l["daysRemaining"]));
        let cap = l["cap"].as_u64().unwrap_or(0);
        let active = used["active"].as_u64().unwrap_or(0);
        let pct = if cap == 0 {
            0.0
        } else {
            active as f64 * 100.0 / cap as f64
        };
        println!(
            "use:            {active} active of {cap} ({pct:.1}%), {} captive",
            text(&used["captive"])
        );
        Ok(ExitCode::SUCCESS)
    })
}

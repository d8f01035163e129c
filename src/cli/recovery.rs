//! The operator commands of restores and copies: `kith after-restore` and
//! `kith origin show|renew|adopt` (`docs/operations.md`, Restores and copies).

use clap::Subcommand;

use crate::app::App;
use crate::config::Config;
use crate::consistency::restore::{self, OriginChange};

#[derive(Subcommand)]
pub enum OriginAction {
    /// Print the origin, the ones it replaced, and whether the database is where it was made.
    Show,
    /// A new origin, for a copy that is to live beside the original (staging, a new region).
    Renew,
    /// Keep the origin on a database moved or upgraded with everything it wrote.
    Adopt,
}

/// `kith after-restore`.
pub(super) async fn after_restore(config: Config, progress: bool) -> anyhow::Result<()> {
    let app = App::start(config).await?;
    let started = std::time::Instant::now();
    let summary = restore::after_restore(&app, progress).await?;
    println!("{summary}");
    println!(
        "done in {:.1} s; start Kith again, then check with `kith verify`",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `kith origin …`.
pub(super) async fn origin(config: Config, action: OriginAction) -> anyhow::Result<()> {
    let app = App::start(config).await?;
    let change = match action {
        OriginAction::Show => {
            let origin = restore::show_origin(&app).await?;
            println!("origin {}", origin.origin);
            for retired in &origin.retired {
                println!("retired {retired}");
            }
            if origin.in_place() {
                println!("made on this database ({})", origin.identity);
            } else {
                println!(
                    "made on {}, and this database is {}: relays and projectors refuse to start \
                     (see `kith after-restore`, `kith origin renew`, `kith origin adopt`)",
                    origin.identity, origin.live_identity
                );
            }
            return Ok(());
        }
        OriginAction::Renew => OriginChange::Renew,
        OriginAction::Adopt => OriginChange::Adopt,
    };
    let (before, after) = restore::change_origin(&app, change).await?;
    match change {
        OriginChange::Renew => println!(
            "origin renewed: {} -> {}; events of the old origin are refused from now on",
            before.origin, after.origin
        ),
        OriginChange::Adopt if before.in_place() => println!(
            "origin {} was already made on this database; nothing changed",
            after.origin
        ),
        OriginChange::Adopt => println!(
            "origin {} adopted: made on {}, now recorded on {}",
            after.origin, before.identity, after.identity
        ),
    }
    Ok(())
}

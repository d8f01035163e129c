//! Rebuilds when a migration is added: `embed_migrations!` reads the
//! `migrations/` folder at compile time, and cargo does not otherwise see a
//! new folder in it.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}

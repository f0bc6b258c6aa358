//! The `orbit` command line: see `orbit --help` and [`orbit::cli`].

fn main() -> std::process::ExitCode {
    orbit::cli::main()
}

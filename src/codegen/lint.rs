//! The SQL lint (SPEC §8). Placeholder until the sqlparser-based implementation lands.

use super::Object;

#[derive(Debug, Clone)]
pub struct Violation {
    pub object: String,
    pub message: String,
}
impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.object, self.message)
    }
}
#[derive(Debug, Clone)]
pub struct Unparsed {
    pub object: String,
    pub statement: String,
    pub reason: String,
}
#[derive(Debug, Default)]
pub struct Report {
    pub violations: Vec<Violation>,
    pub unparsed: Vec<Unparsed>,
}
pub fn lint(_objects: &[Object]) -> Report {
    Report::default()
}
impl std::fmt::Display for Unparsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} ({})", self.object, self.statement, self.reason)
    }
}

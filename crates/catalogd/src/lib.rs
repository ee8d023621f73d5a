//! catalogd library (being built).

//! What every manager that fetches remote content shares: catalogd pulls catalog images with
//! it, the provisioner bundle images and Helm chart artifacts. Each part is a decision of its
//! own, tested beside it; a manager asks [`image::ImageSource`] for an image and maps an
//! [`Error`]'s [`ErrorKind`] to a condition reason of its own.
//!
//! * [`image`]: the registry client, manifests, the layer cache and the image filesystem;
//!   [`image::auth`]: pull secrets as registry credentials.
//! * [`network`]: which hosts and addresses a source may reach; [`scope`]: which hosts and
//!   users a credential Secret names; [`credentials`]: the opt-in label of credential Secrets.
//! * [`budget`]: the bytes of content held at once, across all pulls.
//! * [`flags`]: the image and network flags every puller takes, and one constructor of the
//!   image source from them.
//! * [`tar_walk`], [`paths`]: tar entries read with paths normalized and kept inside;
//!   [`redact`], [`describe`]: what messages show of URLs and request errors.

pub mod budget;
pub mod credentials;
pub mod describe;
mod error;
pub mod flags;
pub mod image;
pub mod network;
pub mod paths;
pub mod redact;
pub mod scope;
pub mod tar_walk;

pub use error::{Error, ErrorKind};

//! What a scanner says it is ([`Identity`]): the vocabulary the sources
//! that read it (`source::identity`), the telemetry that shows it and
//! `status` share.

/// A scanner's USB identity.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// USB vendor ID.
    pub vendor_id: u16,
    /// USB product ID.
    pub product_id: u16,
    /// The manufacturer string, when the device gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    /// The product string, when the device gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    /// The serial number, when the device gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The device release (`bcdDevice`, as `1.02`): the firmware version
    /// most scanners report there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

impl Identity {
    /// The model: manufacturer and product strings, else the IDs
    /// (`0403:6001`).
    pub fn model(&self) -> String {
        match (&self.manufacturer, &self.product) {
            (Some(m), Some(p)) if p.starts_with(m.as_str()) => p.clone(),
            (Some(m), Some(p)) => format!("{m} {p}"),
            (None, Some(p)) => p.clone(),
            _ => format!("{:04x}:{:04x}", self.vendor_id, self.product_id),
        }
    }

    /// `model (vid:pid), serial S, release R` for logs and `status`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} ({:04x}:{:04x})",
            self.model(),
            self.vendor_id,
            self.product_id
        );
        if let Some(sn) = &self.serial {
            s += &format!(", serial {sn}");
        }
        if let Some(r) = &self.release {
            s += &format!(", release {r}");
        }
        s
    }

    /// Whether `other` is another physical device: another model or
    /// another serial number (a device without one is told apart by its
    /// IDs alone).
    pub fn is_other_device(&self, other: &Identity) -> bool {
        (self.vendor_id, self.product_id, &self.serial)
            != (other.vendor_id, other.product_id, &other.serial)
    }
}

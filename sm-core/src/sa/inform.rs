//! InformInfo subscriptions (IBA 13.4.11, 15.2.5.12) and the Reports the
//! SA sends for them: traps 64/65 (a GID went in or out of service, found
//! by comparing one sweep's end ports with the next) and 66/67 (a
//! multicast group was created or deleted). A subscriber gets a Report
//! only when it may know of the event (IBA o13-17.1.1, as OpenSM): for
//! 64/65 it shares a partition with the port in question, for 66/67 it
//! is in the group's partition; the caller decides that per subscription.

use sm_mad::mad::{attr, method};
use sm_mad::notice::{
    notice_type, producer, Details, Packet as NoticePacket, Repr as NoticeRepr, Source,
};
use sm_mad::sa::{self, status};
use sm_mad::sa_inform_info::{
    Packet as InfoPacket, RecordPacket, RecordRepr, Repr as InfoRepr, RECORD_COMPONENTS,
    RECORD_PADDED_LEN,
};

/// One subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscription {
    /// GID of the subscribing port.
    pub subscriber_gid: u128,
    /// LID Reports go to (the requester's).
    pub lid: u16,
    /// QP Reports go to: the requester's, which the SA also writes into the
    /// subscription's QPN (as IBA says the SA's record shows it).
    pub qpn: u32,
    /// What was asked for.
    pub info: InfoRepr,
}

/// An SA Report to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Destination LID.
    pub dlid: u16,
    /// Destination QP.
    pub dqpn: u32,
    /// The MAD (SubnAdmReport(Notice)).
    pub mad: Vec<u8>,
}

/// All subscriptions, in arrival order.
#[derive(Debug, Clone, Default)]
pub struct Subscriptions {
    subs: Vec<Subscription>,
    tid: u64,
}

/// Whether two InformInfos name the same subscription: everything but
/// Subscribe, QPN and RespTimeValue (the QPN is the requester's address,
/// compared apart).
fn same(a: &InfoRepr, b: &InfoRepr) -> bool {
    let key = |i: &InfoRepr| InfoRepr {
        subscribe: 0,
        resp_time_value: 0,
        qpn: 0,
        ..*i
    };
    key(a) == key(b)
}

impl Subscriptions {
    /// Subscriptions held.
    pub fn iter(&self) -> impl Iterator<Item = &Subscription> {
        self.subs.iter()
    }

    /// Subscriptions held by the port `gid`.
    pub fn count_of(&self, gid: u128) -> usize {
        self.subs.iter().filter(|s| s.subscriber_gid == gid).count()
    }

    /// SubnAdmSet(InformInfo) from the port with `gid` at `lid`, QP `qpn`.
    /// A subscription is known by its requester's address and its fields
    /// (not its QPN); subscribing again replaces it, unsubscribing what is
    /// not there is ERR_REQ_INVALID. A port holds at most `max_per_port`
    /// subscriptions (each costs a Report per event): one more is
    /// ERR_NO_RESOURCES.
    pub fn set(
        &mut self,
        gid: u128,
        lid: u16,
        qpn: u32,
        data: &[u8],
        max_per_port: usize,
    ) -> Result<InfoRepr, u16> {
        let info =
            InfoRepr::parse(&InfoPacket::new_checked(data).map_err(|_| status::REQ_INVALID)?)
                .map_err(|_| status::REQ_INVALID)?;
        if info.subscribe > 1 || info.is_generic > 1 {
            return Err(status::REQ_INVALID);
        }
        if info.lid_range_begin != sm_mad::sa_inform_info::ALL_LIDS
            && info.lid_range_end != 0
            && info.lid_range_end < info.lid_range_begin
        {
            return Err(status::REQ_INVALID);
        }
        let pos = self.subs.iter().position(|s| {
            s.subscriber_gid == gid && s.lid == lid && s.qpn == qpn && same(&s.info, &info)
        });
        let mut info = info;
        if info.subscribe == 1 {
            info.qpn = qpn;
            let sub = Subscription {
                subscriber_gid: gid,
                lid,
                qpn,
                info,
            };
            match pos {
                Some(i) => self.subs[i] = sub,
                None if self.count_of(gid) >= max_per_port => return Err(status::NO_RESOURCES),
                None => self.subs.push(sub),
            }
        } else {
            let i = pos.ok_or(status::REQ_INVALID)?;
            self.subs.remove(i);
        }
        Ok(info)
    }

    /// Puts back a saved subscription; false when one with the same
    /// requester address and fields is held already.
    pub fn restore(&mut self, sub: Subscription) -> bool {
        let held = self.subs.iter().any(|s| {
            s.subscriber_gid == sub.subscriber_gid && s.lid == sub.lid && s.qpn == sub.qpn && same(&s.info, &sub.info)
        });
        if !held {
            self.subs.push(sub);
        }
        !held
    }

    /// Drops the subscriptions of ports no longer in the fabric.
    pub fn retain(&mut self, alive: impl Fn(u128) -> bool) {
        self.subs.retain(|s| alive(s.subscriber_gid));
    }

    /// InformInfoRecords matching a query, padded. Untrusted requesters
    /// see QPN 0 (C15-0.2-1.16: where a port takes its Reports is not
    /// theirs to know).
    pub fn records(&self, data: &[u8], mask: u64, trusted: bool) -> Vec<[u8; RECORD_PADDED_LEN]> {
        let mut out = Vec::new();
        let mut per_gid: std::collections::HashMap<u128, u16> = std::collections::HashMap::new();
        for s in &self.subs {
            let n = per_gid.entry(s.subscriber_gid).or_insert(0);
            let repr = RecordRepr {
                subscriber_gid: s.subscriber_gid,
                subscriber_enum: *n,
                inform_info: InfoRepr {
                    qpn: if trusted { s.info.qpn } else { 0 },
                    ..s.info
                },
            };
            *n += 1;
            let mut rec = [0u8; RECORD_PADDED_LEN];
            repr.emit(&mut RecordPacket::new_unchecked(&mut rec[..]));
            if sa::matches(RECORD_COMPONENTS, mask, data, &rec) {
                out.push(rec);
            }
        }
        out
    }

    /// Reports of generic trap `number` about `gid` (at `lid`), one per
    /// subscription that covers it and that `permitted` lets know of it
    /// (o13-17.1.1); the SA at `sa_lid` issues them.
    pub fn reports(
        &mut self,
        number: u16,
        gid: u128,
        lid: u16,
        sa_lid: u16,
        sa_gid: u128,
        permitted: impl Fn(&Subscription) -> bool,
    ) -> Vec<Report> {
        let notice = NoticeRepr {
            notice_type: notice_type::INFO,
            source: Source::Generic {
                producer_type: producer::CLASS_MANAGER,
                trap_number: number,
            },
            issuer_lid: sa_lid,
            toggle: false,
            count: 0,
            details: Details::Gid {
                gid: gid.to_be_bytes(),
            },
            issuer_gid: Some(sa_gid.to_be_bytes()),
        };
        let mut out = Vec::new();
        for s in &self.subs {
            if !s
                .info
                .covers(number, notice_type::INFO, producer::CLASS_MANAGER, lid, gid)
                || !permitted(s)
            {
                continue;
            }
            self.tid = self.tid.wrapping_add(1);
            let mut mad = vec![0u8; sm_mad::MAD_LEN];
            let header = sa::Repr {
                method: method::REPORT,
                transaction_id: 0x5a00_0000 | (self.tid & 0xff_ffff),
                attribute_id: attr::NOTICE,
                ..Default::default()
            };
            header.emit(&mut sa::Packet::new_unchecked(&mut mad[..]));
            notice.emit(&mut NoticePacket::new_unchecked(&mut mad[sa::HEADER_LEN..]));
            out.push(Report {
                dlid: s.lid,
                dqpn: s.qpn,
                mad,
            });
        }
        out
    }
}

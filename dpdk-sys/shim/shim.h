/*
 * kbng C shim: non-inline wrappers for DPDK's static-inline fast path.
 *
 * DPDK 22.11 defines rx/tx burst, mbuf alloc/free, the mbuf data helpers, the TSC read, the
 * lcore id and the meter checks as `static inline` in its headers, so they have no symbol that
 * Rust could link against. Each function here forwards to exactly one of them, with the same
 * contract as the DPDK function it names; see that function's documentation in the DPDK headers.
 */
#ifndef KBNG_SHIM_H
#define KBNG_SHIM_H

#include <stdint.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_meter.h>

/* Packet I/O: rte_eth_rx_burst / rte_eth_tx_burst. */
uint16_t kbng_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
			   uint16_t nb_pkts);
uint16_t kbng_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
			   uint16_t nb_pkts);

/* Mbuf allocation: rte_pktmbuf_alloc / rte_pktmbuf_free / rte_pktmbuf_alloc_bulk /
 * rte_pktmbuf_free_bulk (the last one is exported by DPDK too; wrapped for one naming scheme). */
struct rte_mbuf *kbng_pktmbuf_alloc(struct rte_mempool *mp);
void kbng_pktmbuf_free(struct rte_mbuf *m);
int kbng_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int count);
void kbng_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count);

/* Mbuf data: rte_pktmbuf_mtod, data_len, pkt_len, headroom, tailroom, append, trim (prepend and
 * adj are field updates written in Rust, see mbuf.rs). */
uint8_t *kbng_pktmbuf_mtod(struct rte_mbuf *m);
uint16_t kbng_pktmbuf_data_len(const struct rte_mbuf *m);
uint32_t kbng_pktmbuf_pkt_len(const struct rte_mbuf *m);
uint16_t kbng_pktmbuf_headroom(const struct rte_mbuf *m);
uint16_t kbng_pktmbuf_tailroom(const struct rte_mbuf *m);
uint8_t *kbng_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
int kbng_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);

/* rte_errno: a thread-local variable, which bindgen cannot bind. */
int kbng_errno(void);

/* CPU: rte_rdtsc, rte_lcore_id, rte_prefetch0. */
uint64_t kbng_rdtsc(void);
unsigned int kbng_lcore_id(void);
void kbng_prefetch0(const void *p);

/* Meters, colour-blind mode: RFC 2697 srTCM and RFC 2698 trTCM. Return enum rte_color. */
int kbng_meter_srtcm_color_blind_check(struct rte_meter_srtcm *m,
				       struct rte_meter_srtcm_profile *p, uint64_t time,
				       uint32_t pkt_len);
int kbng_meter_trtcm_color_blind_check(struct rte_meter_trtcm *m,
				       struct rte_meter_trtcm_profile *p, uint64_t time,
				       uint32_t pkt_len);

/* RSS hash-field sets. DPDK defines them with the function-like RTE_BIT64 macro, which bindgen
 * cannot evaluate, so the shim exports the values. */
enum kbng_rss_fields {
	KBNG_RSS_IP = 0,	  /* RTE_ETH_RSS_IP: source and destination address */
	KBNG_RSS_IP_L3_SRC = 1, /* RTE_ETH_RSS_IP | RTE_ETH_RSS_L3_SRC_ONLY */
	KBNG_RSS_IP_L3_DST = 2, /* RTE_ETH_RSS_IP | RTE_ETH_RSS_L3_DST_ONLY */
};
uint64_t kbng_rss_hf(enum kbng_rss_fields which);
/* RTE_ETH_RSS_L3_SRC_ONLY | RTE_ETH_RSS_L3_DST_ONLY: the modifier bits, not protocols. */
uint64_t kbng_rss_l3_only_bits(void);

#endif /* KBNG_SHIM_H */

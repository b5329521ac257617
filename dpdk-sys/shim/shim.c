/* See shim.h: each function forwards to one static-inline DPDK function. */
#include "shim.h"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_prefetch.h>

uint16_t kbng_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
			   uint16_t nb_pkts)
{
	return rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts);
}

uint16_t kbng_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
			   uint16_t nb_pkts)
{
	return rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts);
}

struct rte_mbuf *kbng_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

void kbng_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

int kbng_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int count)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, count);
}

void kbng_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count)
{
	rte_pktmbuf_free_bulk(mbufs, count);
}

uint8_t *kbng_pktmbuf_mtod(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, uint8_t *);
}

uint16_t kbng_pktmbuf_data_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_data_len(m);
}

uint32_t kbng_pktmbuf_pkt_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_pkt_len(m);
}

uint16_t kbng_pktmbuf_headroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_headroom(m);
}

uint16_t kbng_pktmbuf_tailroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_tailroom(m);
}

uint8_t *kbng_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return (uint8_t *)rte_pktmbuf_append(m, len);
}

int kbng_pktmbuf_trim(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_trim(m, len);
}

int kbng_errno(void)
{
	return rte_errno;
}

uint64_t kbng_rdtsc(void)
{
	return rte_rdtsc();
}

unsigned int kbng_lcore_id(void)
{
	return rte_lcore_id();
}

void kbng_prefetch0(const void *p)
{
	rte_prefetch0(p);
}

int kbng_meter_srtcm_color_blind_check(struct rte_meter_srtcm *m,
				       struct rte_meter_srtcm_profile *p, uint64_t time,
				       uint32_t pkt_len)
{
	return (int)rte_meter_srtcm_color_blind_check(m, p, time, pkt_len);
}

int kbng_meter_trtcm_color_blind_check(struct rte_meter_trtcm *m,
				       struct rte_meter_trtcm_profile *p, uint64_t time,
				       uint32_t pkt_len)
{
	return (int)rte_meter_trtcm_color_blind_check(m, p, time, pkt_len);
}

uint64_t kbng_rss_hf(enum kbng_rss_fields which)
{
	switch (which) {
	case KBNG_RSS_IP_L3_SRC:
		return RTE_ETH_RSS_IP | RTE_ETH_RSS_L3_SRC_ONLY;
	case KBNG_RSS_IP_L3_DST:
		return RTE_ETH_RSS_IP | RTE_ETH_RSS_L3_DST_ONLY;
	case KBNG_RSS_IP:
	default:
		return RTE_ETH_RSS_IP;
	}
}

uint64_t kbng_rss_l3_only_bits(void)
{
	return RTE_ETH_RSS_L3_SRC_ONLY | RTE_ETH_RSS_L3_DST_ONLY;
}

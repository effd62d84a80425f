/* Ethos-U55/U65/U85 control registers (APB), byte offsets from the NPU base and
 * the fields this driver uses. From Arm's public register descriptions
 * (Ethos-U55/U65/U85 TRMs, as also described by the open ethos-u-core-driver
 * interface headers); written here from those facts. */
#ifndef ETHOSU_REGS_H
#define ETHOSU_REGS_H

/* Shared by all three products. */
#define NPU_ID 0x0000u
#define NPU_STATUS 0x0004u
#define NPU_CMD 0x0008u
#define NPU_RESET 0x000Cu
#define NPU_QBASE 0x0010u
#define NPU_QBASE_HI 0x0014u
#define NPU_QREAD 0x0018u
#define NPU_QCONFIG 0x001Cu
#define NPU_QSIZE 0x0020u
#define NPU_PROT 0x0024u
#define NPU_CONFIG 0x0028u
#define NPU_REGIONCFG 0x003Cu
#define NPU_BASEP(n) (0x0080u + 8u * (n)) /* 64-bit: low word, then high word */
#define NPU_BASEP_COUNT 8u

/* U55/U65: AXI limits, one set per AXI configuration index. */
#define NPU_AXI_LIMIT(n) (0x0040u + 4u * (n))
/* U85: memory attributes per configuration index, AXI limits per port kind, MAC power ramp. */
#define NPU85_POWER_CTRL 0x0038u
#define NPU85_MEM_ATTR(n) (0x0040u + 4u * (n))
#define NPU85_AXI_SRAM 0x0050u
#define NPU85_AXI_EXT 0x0054u

/* PMU: the U85 block sits 0x1000 higher and has 8 event counters (U55/U65: 4). */
#define NPU_PMU_BASE_U55 0x0000u
#define NPU_PMU_BASE_U85 0x1000u
#define NPU_PMCR 0x0180u
#define NPU_PMCNTENSET 0x0184u
#define NPU_PMCNTENCLR 0x0188u
#define NPU_PMOVSCLR 0x0190u
#define NPU_PMCCNTR 0x01A0u
#define NPU_PMCCNTR_HI 0x01A4u
#define NPU_PMEVCNTR(n) (0x0300u + 4u * (n))
#define NPU_PMEVTYPER(n) (0x0380u + 4u * (n))

/* STATUS */
#define STATUS_STATE_RUNNING (1u << 0)
#define STATUS_IRQ_RAISED (1u << 1)
#define STATUS_BUS_ERROR (1u << 2)
#define STATUS_RESET_BUSY (1u << 3)
#define STATUS_CMD_PARSE_ERROR (1u << 4)
#define STATUS_CMD_END_REACHED (1u << 5)
#define STATUS_PMU_IRQ (1u << 6)
#define STATUS_WD_FAULT (1u << 7)     /* U55/U65 weight decoder */
#define STATUS_ECC_FAULT (1u << 8)
#define STATUS_BRANCH_FAULT (1u << 9) /* U85 */
#define STATUS_FAULT_IFACE(s) (((s) >> 11) & 1u)
#define STATUS_FAULT_CHANNEL(s) (((s) >> 12) & 0xFu)

/* CMD */
#define CMD_START (1u << 0)
#define CMD_CLEAR_IRQ (1u << 1)
#define CMD_KEEP_MASK 0xCu /* clock and power q-interface enables: preserved on every write */

/* RESET and PROT: bit 0 privileged, bit 1 non-secure */
#define PROT_PRIVILEGED (1u << 0)
#define PROT_NONSECURE (1u << 1)

/* PMCR */
#define PMCR_CNT_EN (1u << 0)
#define PMCR_EVENT_RESET (1u << 1)
#define PMCR_CYCLE_RESET (1u << 2)
#define PMCR_NUM_EVENTS(v) (((v) >> 11) & 0x1Fu)
#define PMCNT_CYCLE (1u << 31)

/* PMU events counted per inference (same numbers on the U55/U65 and U85). */
#define PMU_EVENT_NPU_ACTIVE 35u
#define PMU_EVENT_MAC_ACTIVE 48u
#define PMU_EVENT_AXI0_RD_BEATS 130u /* U85: SRAM read beats */
#define PMU_EVENT_AXI0_WR_BEATS 135u /* U85: SRAM write beats */

#endif

/**
 * The simulator's own exchange rates: US dollars for one unit of each presentment currency it takes
 * (currencies.ts, SUPPORTED), used only to convert a charge to the account's settlement currency (USD,
 * account.ts) for Stripe's minimum charge (minimum-amounts.ts). APPROXIMATE mid-market rates, fixed as of
 * mid-2025 and never updated: Stripe converts at the day's rate, so an amount within a few percent of
 * the minimum may be taken here and refused there (or the reverse). Test with amounts clearly on one side.
 * Data of the simulator alone: nothing of the service's money code is used (it shares no code with the
 * adapter). A test keeps it covering every supported currency, so no currency goes unchecked.
 */
export const USD_PER_UNIT: Readonly<Record<string, string>> = {
  usd: '1', aed: '0.2723', afn: '0.0142', all: '0.0117', amd: '0.0026', ang: '0.5587', aoa: '0.00109',
  ars: '0.00085', aud: '0.65', awg: '0.5556', azn: '0.588', bam: '0.583', bbd: '0.5', bdt: '0.0082',
  bgn: '0.583', bhd: '2.6596', bif: '0.000336', bmd: '1', bnd: '0.78', bob: '0.1447', brl: '0.18',
  bsd: '1', bwp: '0.074', byn: '0.31', bzd: '0.5', cad: '0.73', cdf: '0.00035', chf: '1.22',
  clp: '0.00106', cny: '0.139', cop: '0.00025', crc: '0.00198', cve: '0.0104', czk: '0.046',
  djf: '0.00562', dkk: '0.153', dop: '0.0165', dzd: '0.0077', egp: '0.0202', etb: '0.0073', eur: '1.14',
  fjd: '0.44', fkp: '1.35', gbp: '1.35', gel: '0.368', gip: '1.35', gmd: '0.014', gnf: '0.000115',
  gtq: '0.13', gyd: '0.00478', hkd: '0.1274', hnl: '0.0383', htg: '0.0076', huf: '0.0029',
  idr: '0.0000615', ils: '0.29', inr: '0.0116', isk: '0.0081', jmd: '0.0063', jod: '1.41', jpy: '0.0069',
  kes: '0.0077', kgs: '0.0114', khr: '0.00025', kmf: '0.00232', krw: '0.00073', kwd: '3.27', kyd: '1.2',
  kzt: '0.0019', lak: '0.000046', lbp: '0.0000112', lkr: '0.0033', lrd: '0.005', lsl: '0.056',
  mad: '0.11', mdl: '0.058', mga: '0.000224', mkd: '0.0185', mmk: '0.000476', mnt: '0.00028',
  mop: '0.1237', mur: '0.022', mvr: '0.0649', mwk: '0.000577', mxn: '0.053', myr: '0.236', mzn: '0.0157',
  nad: '0.056', ngn: '0.00065', nio: '0.0272', nok: '0.099', npr: '0.0073', nzd: '0.6', omr: '2.6',
  pab: '1', pen: '0.28', pgk: '0.245', php: '0.0177', pkr: '0.00353', pln: '0.27', pyg: '0.000125',
  qar: '0.2747', ron: '0.229', rsd: '0.0097', rub: '0.0127', rwf: '0.0007', sar: '0.2666', sbd: '0.12',
  scr: '0.07', sek: '0.105', sgd: '0.78', shp: '1.35', sle: '0.044', sos: '0.00175', srd: '0.027',
  std: '0.000045', szl: '0.056', thb: '0.0307', tjs: '0.1', tnd: '0.34', top: '0.42', try: '0.025',
  ttd: '0.147', twd: '0.034', tzs: '0.00038', uah: '0.024', ugx: '0.000278', uyu: '0.025',
  uzs: '0.000079', vnd: '0.0000383', vuv: '0.0084', wst: '0.36', xaf: '0.00174', xcd: '0.37',
  xcg: '0.5587', xof: '0.00174', xpf: '0.00955', yer: '0.0041', zar: '0.056', zmw: '0.042',
};

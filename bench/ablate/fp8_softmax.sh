# scripts/gpu_ablate.sh variants: the fp8 forward with one stage left out (perf-notes run 82)
mk base
mk notr $F '/transpose_v(sV0 + st/d'
mk noexp $S 's/const float pe = fast_exp2(/const float pe = (/'
mk nosum $S 's/sumc\[jj % CHAINS\] += pe;//'
mk nomax $S 's/mxc\[jj % CHAINS\] = fmaxf(mxc\[jj % CHAINS\], x);//'

#!/usr/bin/env bash
# The plot of docs/models/t5.md: the noise rate of T5's span corruption at each position, over
# 10^5 draws, at lengths 20 and 69 (a short sequence, and the longest of the default pretraining), ours beside
# Google's random_spans_noise_mask layout. usage: bash bench/t5_noise_by_position.sh BUILD_DIR [OUT.png]
set -euo pipefail
build=$(realpath "$1")
out=${2:-docs/models/img/t5_noise_by_position.png}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for L in 20 69; do "$build/bench/ctgrad-span-noise" "$L" 100000 > "$work/$L.csv"; done
gnuplot <<GP
set terminal pngcairo size 1000,420 font ",10"
set output "$out"
set datafile separator ","
set multiplot layout 1,2 title "T5 span corruption: how often each position is noise (10^5 draws, density 0.15, mean span 3)"
set key top left
set xlabel "position in the sequence"
set ylabel "P(noise)"
set yrange [0:1.05]
set title "length 20: one span of 3 tokens"
plot "$work/20.csv" skip 1 using 1:3 with linespoints pt 7 ps 0.5 title "Google's layout", "$work/20.csv" skip 1 using 1:2 with linespoints pt 7 ps 0.5 title "ctgrad", 3.0/20 with lines dt 2 lc rgb "gray" title "3/20"
set title "length 69 (the default pretraining's sequences): 10 tokens in 3 spans"
plot "$work/69.csv" skip 1 using 1:3 with lines lw 2 title "Google's layout", "$work/69.csv" skip 1 using 1:2 with lines lw 2 title "ctgrad", 10.0/69 with lines dt 2 lc rgb "gray" title "10/69"
unset multiplot
GP
echo "wrote $out"
